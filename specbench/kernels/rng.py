"""Triton twins of ``specbench/rng.py``: the same 32-bit words, bit for bit, and the exponential
variates ``E = -log u`` the races draw from them."""

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
def hash_word(key, index):
    # word `index` of stream `key` (uint32)
    return fmix32(key + tl.cast(index, tl.uint32) * 0x9E3779B9)


@triton.jit
def uniform_of(word):
    # the uniform in the open interval (0, 1) of a word: its top 23 bits k as (k + 1/2) / 2**23,
    # computed as k / 2**23 + 2**-24, one fused multiply-add, exact either way (k < 2**23)
    return (word >> 9).to(tl.float32) * (1.0 / 8388608.0) + (0.5 / 8388608.0)


@triton.jit
def one_minus_uniform(word):
    # 1 - u for the uniform of a word, exactly: (2**24 - 1 - 2k) / 2**24 needs 24 bits, one multiply-add
    return (word >> 9).to(tl.float32) * (-1.0 / 8388608.0) + (1.0 - 0.5 / 8388608.0)


@triton.jit
def uniform_at(key, index):
    # the uniform of word `index` of stream `key`
    return uniform_of(hash_word(key, index))


# log1p(f) = f + f^2 P(f) on [-1/3, 1/3]: P's coefficients, lowest degree first, fitted by least
# squares (relative error of log1p, 4000 Chebyshev nodes, float64) and rounded to float32
_P0 = tl.constexpr(-0.5)
_P1 = tl.constexpr(0.3333320617675781)
_P2 = tl.constexpr(-0.2499990463256836)
_P3 = tl.constexpr(0.20010778307914734)
_P4 = tl.constexpr(-0.16675931215286255)
_P5 = tl.constexpr(0.14000912010669708)
_P6 = tl.constexpr(-0.12245946377515793)
_P7 = tl.constexpr(0.14005276560783386)
_P8 = tl.constexpr(-0.12627705931663513)
_LN2 = tl.constexpr(0.6931471805599453)


@triton.jit
def neg_log_of_uniform(u):
    # E = -log u for a uniform of this module, within 1.04 ulp of the exact value for every one of
    # the 2**23 uniforms (tests/test_rng.py), in about 16 instructions where the general logf takes
    # 27: u is always a normal float in [2**-24, 1), so there is no zero, infinity or subnormal case.
    # u = 2**e m with m in [2/3, 4/3): log u = e ln2 + log1p(m - 1), and m - 1 is exact.
    bits = u.to(tl.int32, bitcast=True)
    e = (bits - 0x3F2AAAAB) >> 23
    f = (bits - (e << 23)).to(tl.float32, bitcast=True) - 1.0
    p = _P8 * f + _P7
    p = p * f + _P6
    p = p * f + _P5
    p = p * f + _P4
    p = p * f + _P3
    p = p * f + _P2
    p = p * f + _P1
    p = p * f + _P0
    return -(e.to(tl.float32) * _LN2 + (f + (f * f) * p))
