"""``rows.add_if_above`` and ``rows.add_if_ahead`` against the select-and-add they stand for, on hostile floats: NaN,
infinities, signed zeros, subnormals, values one ulp apart, ties, and ids up to 2**31 - 1. On a GPU they are inline
PTX (a compare and a predicated add), so this is where their arithmetic is checked, bit for bit; under the
interpreter they are the select-and-add itself. Totals are never -0 here: a sum of masses never is (the helpers'
precondition, rows.py)."""

from __future__ import annotations

import itertools

import pytest
import torch

pytest.importorskip("triton")

import triton
import triton.language as tl
from conftest import device_for

from specbench.kernels import rows

TINY = 2.0**-149  # the least subnormal
VALUES = [float("nan"), float("-inf"), float("inf"), -0.0, 0.0, TINY, -TINY, 1e-40, 2.0**-126, -2.0**-126, 1.0,
          1.0000001192092896, 0.9999999403953552, -3.5, 3.4028234663852886e38, -3.4028234663852886e38]
MASSES = [0.0, -0.0, TINY, 1.0, 1e30, float("inf"), float("nan")]
TOTALS = [0.0, TINY, 1.0, 3.0, float("inf")]
IDS = [(0, 1), (5, 5), (7, 3), (2**31 - 2, 2**31 - 1), (2**31 - 1, 0)]  # (the token's id, the pivot's)


@triton.jit
def _both_ways_kernel(out_ptr, total_ptr, value_ptr, bound_ptr, offs_ptr, pivot_id_ptr, mass_ptr, N,
                      BLOCK: tl.constexpr):
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    keep = i < N
    total = tl.load(total_ptr + i, mask=keep, other=0.0)
    value = tl.load(value_ptr + i, mask=keep, other=0.0)
    bound = tl.load(bound_ptr + i, mask=keep, other=0.0)
    offs = tl.load(offs_ptr + i, mask=keep, other=0)
    pivot_id = tl.load(pivot_id_ptr + i, mask=keep, other=0)
    mass = tl.load(mass_ptr + i, mask=keep, other=0.0)
    tl.store(out_ptr + i, rows.add_if_above(total, value, bound, mass), mask=keep)
    tl.store(out_ptr + N + i, total + tl.where(value > bound, mass, 0.0), mask=keep)
    tl.store(out_ptr + 2 * N + i, rows.add_if_ahead(total, value, bound, offs, pivot_id, mass), mask=keep)
    tl.store(out_ptr + 3 * N + i,
             total + tl.where((value > bound) | ((value == bound) & (offs < pivot_id)), mass, 0.0), mask=keep)


def test_the_predicated_adds_are_the_select_and_add_bit_for_bit():
    device = device_for("triton")
    cases = list(itertools.product(TOTALS, VALUES, VALUES, MASSES, IDS))
    columns = list(zip(*cases))
    total, value, bound, mass = (torch.tensor(column, dtype=torch.float32, device=device)
                                 for column in columns[:4])
    offs = torch.tensor([token for token, _pivot in columns[4]], dtype=torch.int32, device=device)
    pivot_id = torch.tensor([pivot for _token, pivot in columns[4]], dtype=torch.int32, device=device)
    n = len(cases)
    out = torch.empty(4 * n, dtype=torch.float32, device=device)
    block = 1024
    _both_ways_kernel[(triton.cdiv(n, block),)](out, total, value, bound, offs, pivot_id, mass, n, BLOCK=block)
    above, above_plain, ahead, ahead_plain = out.view(4, n).view(torch.int32)
    assert torch.equal(above, above_plain)
    assert torch.equal(ahead, ahead_plain)
    # (the cases reach both sides of each test, and the order's tie both ways)
    taken = ahead != total.view(torch.int32)
    assert bool(taken.any()) and bool((~taken).any())
    tie = (value == bound) & (mass > 0) & (total < float("inf"))
    assert bool((taken & tie).any()) and bool((~taken & tie).any())
