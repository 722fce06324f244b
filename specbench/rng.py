"""Counter-based randomness shared bit for bit by every backend.

Every random number specbench draws is a pure function of
``(request seed, sequence position, purpose, index)``: no state, no offsets, nothing that
depends on the batch size, a request's place in the batch or a kernel's launch shape. The torch
functions here and the Triton helpers in ``specbench/kernels/rng.py`` compute the same 32-bit
words, so both backends emit the same tokens for the same seeds.

The generator: a 32-bit row key is built by feeding the seed's low word, its high word, the
position and the purpose through murmur3's 32-bit finaliser (``fmix32``) in turn; the word for
vocabulary index ``x`` is ``fmix32(key + x * 0x9E3779B9)`` (a Weyl sequence through a bijective
mixer, as in SplitMix). A uniform in the open interval (0, 1) takes the top 23 bits:
``((word >> 9) + 0.5) / 2**23``; it is exact in float32 and never 0 or 1 (with 24 bits the
largest value, ``1 - 2**-25``, would round to 1.0 and make ``E = -log u`` zero).

Request seeds of a run (``request_seed``): a run with one seed ``S`` (a sweep case, the inputs of
``specbench kernels``) gives request ``r`` the 62-bit seed ``request_seed(S, r)``, a hash of both,
so runs under neighbouring seeds share no stream. Two 32-bit words are built by feeding a salt, the
seed's low and high words, then ``r``'s low and high words through ``fmix32`` in turn (salts
``SALT_HIGH`` and ``SALT_LOW``); the seed is ``(high & (2**30 - 1)) << 32 | low``. For a fixed
``S`` the low word is a bijection of ``r < 2**32``, so the requests of one run never share a seed.

Purposes (each random decision has its own stream):
- ``ACCEPT``: the uniform ``u`` of the acceptance test at a position (index 0);
- ``RESIDUAL``: the race that samples the residual distribution after a rejection;
- ``SAMPLE``: the race that samples the target distribution itself (the bonus token, and the
  target's own token in the synthetic mode).
- ``SPREAD``: the per-request draw of a synthetic simulation with per-request spread (which of
  the ``M`` equally likely acceptance rates a request gets; word 0 of position 0's stream).
"""

from __future__ import annotations

import torch

from specbench.errors import SpecbenchError

ACCEPT = 1
RESIDUAL = 2
SAMPLE = 3
SPREAD = 4

GOLDEN = 0x9E3779B9
MIX_1 = 0x85EBCA6B
MIX_2 = 0xC2B2AE35
MASK_32 = 0xFFFFFFFF
SALT_HIGH = 0x3C6EF372
SALT_LOW = 0xA54FF53A
MASK_30 = (1 << 30) - 1


def check_seed(seed: int) -> int:
    """A run's seed is a whole number in ``[0, 2**62)`` (its request seeds are ``request_seed(seed, r)``)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**62:
        raise SpecbenchError(f"seed must be a whole number in [0, 2**62), got {seed!r}")
    return seed


def _mul32(h: torch.Tensor, constant: int) -> torch.Tensor:
    # (h * constant) mod 2**32: torch's int64 product wraps mod 2**64 (two's complement), and the
    # low 32 bits of a wrapped product are exact; tests/test_rng.py checks this against Triton.
    return (h * constant) & MASK_32


def fmix32(h: torch.Tensor) -> torch.Tensor:
    """murmur3's 32-bit finaliser on int64 tensors holding values in [0, 2**32)."""
    h = h ^ (h >> 16)
    h = _mul32(h, MIX_1)
    h = h ^ (h >> 13)
    h = _mul32(h, MIX_2)
    return h ^ (h >> 16)


def seed_key(seeds: torch.Tensor) -> torch.Tensor:
    """The part of a stream key that depends on the seed alone (compute once per request)."""
    seeds = seeds.to(torch.int64)
    key = fmix32((seeds & MASK_32) ^ 0x2545F491)
    return fmix32(key ^ ((seeds >> 32) & MASK_32))


def _words_of(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    # the low and high 32-bit words of int64 values (arithmetic shift; the mask keeps 32 bits)
    return values & MASK_32, (values >> 32) & MASK_32


def request_seed(seed: int | torch.Tensor, request: int | torch.Tensor) -> torch.Tensor:
    """The 62-bit seed of request ``r`` of a run seeded ``seed`` (see the module docstring); broadcasts.

    ``seed`` and ``request``: whole numbers in ``[0, 2**62)``, Python ints or int64 tensors.
    Returns int64 in ``[0, 2**62)``, the same bits as the Triton ``request_seed``.
    """
    seed = torch.as_tensor(seed, dtype=torch.int64)
    request = torch.as_tensor(request, dtype=torch.int64, device=seed.device)
    seed_low, seed_high = _words_of(seed)
    request_low, request_high = _words_of(request)
    halves = []
    for salt in (SALT_HIGH, SALT_LOW):
        half = fmix32(fmix32(seed_low ^ salt) ^ seed_high)
        halves.append(fmix32(fmix32(half ^ request_low) ^ request_high))
    return ((halves[0] & MASK_30) << 32) | halves[1]


def stream_key(seed_keys: torch.Tensor, positions: torch.Tensor, purpose: int) -> torch.Tensor:
    """32-bit key of the (seed, position, purpose) stream; broadcasts; int64 in [0, 2**32)."""
    key = fmix32(seed_keys ^ (positions.to(torch.int64) & MASK_32))
    return fmix32(key ^ purpose)


def row_key(seeds: torch.Tensor, positions: torch.Tensor, purpose: int) -> torch.Tensor:
    """``stream_key(seed_key(seeds), positions, purpose)``."""
    return stream_key(seed_key(seeds), positions, purpose)


def words(key: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The 32-bit word at ``index`` of the stream ``key``; broadcasts; int64 in [0, 2**32)."""
    return fmix32((key + _mul32(index.to(torch.int64), GOLDEN)) & MASK_32)


def to_uniform(word: torch.Tensor) -> torch.Tensor:
    """Top 23 bits of a word as a float32 uniform in the open interval (0, 1), exactly."""
    return ((word >> 9).to(torch.float32) + 0.5) * (1.0 / 8388608.0)


def uniform(
    seeds: torch.Tensor, positions: torch.Tensor, purpose: int, index: torch.Tensor | int = 0
) -> torch.Tensor:
    """Uniforms in (0, 1) for (seed, position, purpose, index); all arguments broadcast."""
    key = row_key(seeds, positions, purpose)
    if isinstance(index, int):
        index = torch.tensor(index, dtype=torch.int64, device=key.device)
    return to_uniform(words(key, index))
