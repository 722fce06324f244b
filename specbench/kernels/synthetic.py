"""Synthetic acceptance without logits: the sweep's simulation kernel.

Each program simulates ``BLOCK`` requests; request ``r`` (``first_request + r`` of the run) has
the seed ``request_seed(seed, first_request + r)`` and reads nothing from memory: its ``u_i`` come
from the counter-based generator, its conditional rates from a ``[K]`` vector. It writes one int32
(drafts accepted) per request.
"""

import triton
import triton.language as tl

from specbench import rng
from specbench.kernels.rng import fmix32, request_seed, seed_key, stream_key

ACCEPT = tl.constexpr(rng.ACCEPT)
SPREAD = tl.constexpr(rng.SPREAD)


@triton.jit(do_not_specialize=["seed", "first_request", "N", "K"])  # one compile for every chunk of a sweep
def _simulate_kernel(
    num_accepted_ptr,  # [N] int32
    conditional_rates_ptr,  # [K] float32
    seed, first_request, N, K,
    BLOCK: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    key_of_seed = seed_key(request_seed(seed, tl.cast(first_request, tl.int64) + r))
    alive = r < N
    count = tl.zeros([BLOCK], tl.int32)
    for i in range(K):
        rate = tl.load(conditional_rates_ptr + i)
        # u_i is word 0 of the (seed, i, ACCEPT) stream; accept iff u_i < c_i
        word = fmix32(stream_key(key_of_seed, i, ACCEPT))
        u = ((word >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)
        alive = alive & (u < rate)
        count += alive.to(tl.int32)
    tl.store(num_accepted_ptr + r, count, mask=r < N)


@triton.jit(do_not_specialize=["seed", "first_request", "N", "K", "M"])
def _simulate_mixture_kernel(
    num_accepted_ptr,  # [N] int32
    conditional_rates_ptr,  # [M, K] float32: row m is the conditional rates of component m
    seed, first_request, N, K, M,
    BLOCK: tl.constexpr,
):
    # per-request spread: request r takes component m = floor(w * M / 2**32), w word 0 of its
    # (seed, 0, SPREAD) stream (M a power of two, so every component has probability 1/M exactly),
    # then accepts position i iff u_i < rates[m, i] with the same u_i as _simulate_kernel
    r = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    key_of_seed = seed_key(request_seed(seed, tl.cast(first_request, tl.int64) + r))
    alive = r < N
    pick = fmix32(stream_key(key_of_seed, 0, SPREAD))
    component = (pick.to(tl.int64) * tl.cast(M, tl.int64)) >> 32
    row = conditional_rates_ptr + component * K
    count = tl.zeros([BLOCK], tl.int32)
    for i in range(K):
        rate = tl.load(row + i, mask=r < N, other=0.0)
        word = fmix32(stream_key(key_of_seed, i, ACCEPT))
        u = ((word >> 9).to(tl.float32) + 0.5) * (1.0 / 8388608.0)
        alive = alive & (u < rate)
        count += alive.to(tl.int32)
    tl.store(num_accepted_ptr + r, count, mask=r < N)
