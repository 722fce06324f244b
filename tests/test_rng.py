"""The counter-based RNG: torch words against plain Python integers, Triton twins bit for bit, uniformity."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats
import torch
from conftest import device_for

from specbench import rng

try:
    import triton
    import triton.language as tl

    from specbench.kernels import rng as kernel_rng
except ModuleNotFoundError:
    triton = None

MASK = 0xFFFFFFFF
SEEDS = [0, 1, 2, 12345, MASK, MASK + 1, 2**40 + 7, 2**63 - 1, -1, -(2**63), -987654321]
POSITIONS = [0, 1, 7, 2**31 - 1, 2**31, MASK, 2**32 + 5, 2**40 + 3]


if triton is not None:

    @triton.jit
    def _stream_kernel(key_ptr, u_ptr, seed_ptr, position_ptr, index_base, PURPOSE: tl.constexpr, N: tl.constexpr):
        # [rows] int64 keys, [rows, N] float32 uniforms at indices index_base + 0..N-1
        row = tl.program_id(0)
        key = kernel_rng.row_key(tl.load(seed_ptr + row), tl.load(position_ptr + row), PURPOSE)
        tl.store(key_ptr + row, key.to(tl.int64))
        offs = tl.arange(0, N)
        tl.store(u_ptr + row * N + offs, kernel_rng.uniform_at(key, offs + index_base))

    @triton.jit
    def _request_seed_kernel(out_ptr, seed_ptr, request_ptr):
        # [rows] int64: request_seed(seed[row], request[row])
        row = tl.program_id(0)
        tl.store(out_ptr + row, kernel_rng.request_seed(tl.load(seed_ptr + row), tl.load(request_ptr + row)))

    @triton.jit
    def _neg_log_kernel(out_ptr, u_ptr, N, BLOCK: tl.constexpr):
        # [N] float32: -log u as the races compute it
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        u = tl.load(u_ptr + offs, mask=offs < N, other=0.5)
        tl.store(out_ptr + offs, kernel_rng.neg_log_of_uniform(u), mask=offs < N)
else:
    _stream_kernel = _request_seed_kernel = _neg_log_kernel = None


def _fmix32(h: int) -> int:
    # murmur3 fmix32 on Python integers (no overflow to worry about)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK
    return h ^ (h >> 16)


def _stream_key(seed: int, position: int, purpose: int) -> int:
    # the construction rng.py's docstring describes: seed low word, high word, position, purpose
    key = _fmix32((seed & MASK) ^ 0x2545F491)
    key = _fmix32(key ^ ((seed >> 32) & MASK))
    key = _fmix32(key ^ (position & MASK))
    return _fmix32(key ^ purpose)


def _request_seed(seed: int, request: int) -> int:
    # the construction rng.py's docstring describes: two chains over salt, seed words, request words
    halves = []
    for salt in (0x3C6EF372, 0xA54FF53A):
        half = _fmix32(_fmix32((seed & MASK) ^ salt) ^ (seed >> 32))
        halves.append(_fmix32(_fmix32(half ^ (request & MASK)) ^ (request >> 32)))
    return ((halves[0] & (2**30 - 1)) << 32) | halves[1]


RUN_SEEDS = [0, 1, 2, 12345, MASK, MASK + 1, 2**40 + 7, 2**62 - 1]
REQUESTS = [0, 1, 2, 999, MASK, MASK + 1, 2**40 + 3, 2**62 - 1]


def _word(key: int, index: int) -> int:
    return _fmix32((key + index * 0x9E3779B9) & MASK)


def test_fmix32_matches_python_integers_on_the_whole_32_bit_range():
    generator = torch.Generator().manual_seed(0)
    values = torch.randint(0, 2**32, (4096,), generator=generator, dtype=torch.int64)
    values = torch.cat([values, torch.tensor([0, 1, MASK, MASK - 1, 2**31, 2**31 - 1])])
    got = rng.fmix32(values).tolist()
    assert got == [_fmix32(v) for v in values.tolist()]
    assert all(0 <= g <= MASK for g in got)


@pytest.mark.parametrize("purpose", [rng.ACCEPT, rng.RESIDUAL, rng.SAMPLE])
def test_stream_keys_and_words_match_python_integers(purpose):
    seeds = torch.tensor(SEEDS, dtype=torch.int64)[:, None]
    positions = torch.tensor(POSITIONS, dtype=torch.int64)[None, :]
    keys = rng.stream_key(rng.seed_key(seeds), positions, purpose)  # [seeds, positions]
    assert torch.equal(keys, rng.row_key(seeds, positions, purpose))
    expected = [[_stream_key(s, p, purpose) for p in POSITIONS] for s in SEEDS]
    assert keys.tolist() == expected

    indices = torch.tensor([0, 1, 2, 99, 100_002, 2**20 + 1, 2**31], dtype=torch.int64)
    words = rng.words(keys[..., None], indices)  # [seeds, positions, indices]
    assert words.tolist() == [[[_word(k, i) for i in indices.tolist()] for k in row] for row in expected]


def test_uniform_is_the_top_23_bits_of_the_word():
    seeds = torch.tensor(SEEDS, dtype=torch.int64)[:, None]
    indices = torch.arange(50, dtype=torch.int64)[None, :]
    got = rng.uniform(seeds, torch.tensor(3), rng.SAMPLE, indices)
    for s, row in zip(SEEDS, got.tolist()):
        key = _stream_key(s, 3, rng.SAMPLE)
        # ((word >> 9) + 0.5) / 2**23, exact in float32
        assert row == [float(np.float32(((_word(key, i) >> 9) + 0.5) / 2**23)) for i in range(50)]


def test_uniform_lies_in_the_open_interval_for_every_23_bit_value():
    # the top word used to round to 1.0 (E = -log u = 0) when 24 bits were taken
    words = torch.arange(2**23, dtype=torch.int64) << 9 | 0x1FF
    u = rng.to_uniform(words)
    assert float(u.min()) > 0.0
    assert float(u.max()) < 1.0


def test_uniform_is_a_pure_function_of_its_counter():
    # the same (seed, position, purpose, index) gives the same number in any batch shape or order
    seeds = torch.tensor([5, 9, 5, 2**33], dtype=torch.int64)
    positions = torch.tensor([3, 3, 3, 0], dtype=torch.int64)
    batch = rng.uniform(seeds[:, None], positions[:, None], rng.RESIDUAL, torch.arange(16)[None, :])
    alone = torch.stack([rng.uniform(seeds[b], positions[b], rng.RESIDUAL, torch.arange(16)) for b in (3, 1, 0, 2)])
    assert torch.equal(batch[[3, 1, 0, 2]], alone)
    assert torch.equal(batch[0], batch[2])


def test_streams_differ_by_seed_position_purpose_and_index():
    index = torch.arange(256)
    base = rng.uniform(torch.tensor(7), torch.tensor(11), rng.ACCEPT, index)
    others = [
        rng.uniform(torch.tensor(8), torch.tensor(11), rng.ACCEPT, index),
        rng.uniform(torch.tensor(7 + 2**32), torch.tensor(11), rng.ACCEPT, index),
        rng.uniform(torch.tensor(7), torch.tensor(12), rng.ACCEPT, index),
        rng.uniform(torch.tensor(7), torch.tensor(11), rng.RESIDUAL, index),
        rng.uniform(torch.tensor(7), torch.tensor(11), rng.SAMPLE, index),
    ]
    for other in others:
        assert int((other == base).sum()) <= 2  # independent streams agree only by chance (p = 2**-24 each)
    assert base.unique().numel() >= 250


def test_uniforms_are_uniform_and_adjacent_seeds_uncorrelated():
    # chi-square over 64 equal bins and Pearson's r between seeds s and s + 1, each at alpha = 1e-3
    seeds = torch.arange(2000, dtype=torch.int64)
    u = rng.uniform(seeds[:, None], torch.tensor(0), rng.SAMPLE, torch.arange(100)[None, :])  # [2000, 100]
    counts = torch.histc(u.flatten(), bins=64, min=0.0, max=1.0)
    assert scipy.stats.chisquare(counts.numpy()).pvalue > 1e-3
    accept = rng.uniform(torch.arange(100_001, dtype=torch.int64), torch.tensor(4), rng.ACCEPT)
    assert scipy.stats.pearsonr(accept[:-1].numpy(), accept[1:].numpy()).pvalue > 1e-3
    assert float(u.min()) > 0.0


def test_triton_twins_give_the_same_keys_and_uniforms_bit_for_bit():
    if _stream_kernel is None:
        pytest.skip("triton cannot be imported here")
    device = device_for("triton")
    seeds = torch.tensor([s for s in SEEDS for _ in POSITIONS], dtype=torch.int64)
    positions = torch.tensor(POSITIONS * len(SEEDS), dtype=torch.int64)
    for purpose in (rng.ACCEPT, rng.RESIDUAL, rng.SAMPLE):
        for index_base in (0, 100_000):
            keys = torch.empty(seeds.numel(), dtype=torch.int64, device=device)
            u = torch.empty(seeds.numel(), 32, dtype=torch.float32, device=device)
            _stream_kernel[(seeds.numel(),)](
                keys, u, seeds.to(device), positions.to(device), index_base, PURPOSE=purpose, N=32
            )
            expected_keys = rng.row_key(seeds, positions, purpose)
            assert torch.equal(keys.cpu(), expected_keys)
            indices = torch.arange(index_base, index_base + 32)[None, :]
            assert torch.equal(u.cpu(), rng.to_uniform(rng.words(expected_keys[:, None], indices)))


def test_the_races_exponentials_are_within_one_ulp_for_every_uniform():
    # E = -log u for all 2**23 uniforms against float64, in units of the float32 spacing at E
    if _neg_log_kernel is None:
        pytest.skip("triton cannot be imported here")
    device = device_for("triton")
    u = rng.to_uniform(torch.arange(1 << 23, dtype=torch.int64) << 9)
    out = torch.empty_like(u, device=device)
    block = 1 << 16
    _neg_log_kernel[(u.numel() // block,)](out, u.to(device), u.numel(), BLOCK=block)
    exact = -torch.log(u.double())
    spacing = torch.from_numpy(np.spacing(exact.float().numpy())).double()
    error = ((out.cpu().double() - exact).abs() / spacing)
    assert float(error.max()) <= 1.1, f"{float(error.max())} ulp at u = {float(u[error.argmax()])}"
    assert u.min() == 2.0**-24 and float(out.cpu()[0]) == pytest.approx(24 * math.log(2), rel=1e-7)


def test_request_seeds_match_python_integers_and_stay_in_62_bits():
    seeds = torch.tensor(RUN_SEEDS, dtype=torch.int64)[:, None]
    requests = torch.tensor(REQUESTS, dtype=torch.int64)[None, :]
    got = rng.request_seed(seeds, requests)
    assert got.tolist() == [[_request_seed(s, r) for r in REQUESTS] for s in RUN_SEEDS]
    assert int(got.min()) >= 0 and int(got.max()) < 2**62
    assert rng.request_seed(5, requests[0]).tolist() == [_request_seed(5, r) for r in REQUESTS]  # int seed


def test_requests_of_one_run_never_share_a_seed_and_neighbouring_runs_share_nothing():
    requests = torch.arange(200_000, dtype=torch.int64)
    first = rng.request_seed(0, requests)
    assert first.unique().numel() == requests.numel()  # the low word is a bijection of r < 2**32
    # the old scheme (seed + r) made run 1's request r run 0's request r + 1; now the runs are disjoint
    second = rng.request_seed(1, requests)
    assert not bool(torch.isin(second, first).any())
    assert int((rng.request_seed(0, requests + 1) == second).sum()) == 0


def test_the_triton_request_seed_is_the_torch_one_bit_for_bit():
    if _request_seed_kernel is None:
        pytest.skip("triton cannot be imported here")
    device = device_for("triton")
    seeds = torch.tensor([s for s in RUN_SEEDS for _ in REQUESTS], dtype=torch.int64)
    requests = torch.tensor(REQUESTS * len(RUN_SEEDS), dtype=torch.int64)
    out = torch.empty_like(seeds, device=device)
    _request_seed_kernel[(seeds.numel(),)](out, seeds.to(device), requests.to(device))
    assert torch.equal(out.cpu(), rng.request_seed(seeds, requests))
