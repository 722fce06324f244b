"""Triton twins of ``specbench/rng.py``: the same 32-bit words, bit for bit."""

import triton
import triton.language as tl


@triton.jit
def fmix32(h):
    # murmur3's 32-bit finaliser; h is uint32, products wrap mod 2**32
    h = h ^ (h >> 16)
    h = h * 0x85EBCA6B
    h = h ^ (h >> 13)
    h = h * 0xC2B2AE35
    return h ^ (h >> 16)


@triton.jit
def seed_key(seed):
    # seed: int64; the seed-only half of a stream key (uint32)
    seed_lo = (seed & 0xFFFFFFFF).to(tl.uint32)
    seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    key = fmix32(seed_lo ^ 0x2545F491)
    return fmix32(key ^ seed_hi)


@triton.jit
def request_seed(seed, request):
    # seed, request: int64 in [0, 2**62); the 62-bit seed of request `request` of a run (int64),
    # the same bits as specbench.rng.request_seed: two fmix32 chains over salt, seed words, request words
    seed = tl.cast(seed, tl.int64)
    request = tl.cast(request, tl.int64)
    seed_lo = (seed & 0xFFFFFFFF).to(tl.uint32)
    seed_hi = ((seed >> 32) & 0xFFFFFFFF).to(tl.uint32)
    request_lo = (request & 0xFFFFFFFF).to(tl.uint32)
    request_hi = ((request >> 32) & 0xFFFFFFFF).to(tl.uint32)
    high = fmix32(fmix32(seed_lo ^ 0x3C6EF372) ^ seed_hi)
    high = fmix32(fmix32(high ^ request_lo) ^ request_hi)
    low = fmix32(fmix32(seed_lo ^ 0xA54FF53A) ^ seed_hi)
    low = fmix32(fmix32(low ^ request_lo) ^ request_hi)
    return ((high & 0x3FFFFFFF).to(tl.int64) << 32) | low.to(tl.int64)


@triton.jit
def stream_key(seed_key_value, position, PURPOSE: tl.constexpr):
    # the uint32 key of the (seed, position, purpose) stream
    key = fmix32(seed_key_value ^ (tl.cast(position, tl.int64) & 0xFFFFFFFF).to(tl.uint32))
    return fmix32(key ^ PURPOSE)


@triton.jit
def row_key(seed, position, PURPOSE: tl.constexpr):
    return stream_key(seed_key(seed), position, PURPOSE)


@triton.jit
def uniform_at(key, index):
    # uniform in the open interval (0, 1) from the top 23 bits of word `index` of stream `key`
    word = fmix32(key + tl.cast(index, tl.uint32) * 0x9E3779B9)
    return ((word >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)
