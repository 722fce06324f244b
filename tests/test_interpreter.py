"""``specbench/kernels/interpreter.py``: under the interpreter a launch walks the language modules once, not at
every helper call, and computes what it did before."""

from __future__ import annotations

import inspect
import os

import pytest
import torch
import triton
import triton.language as tl

import specbench.kernels  # noqa: F401  (applies the patch under TRITON_INTERPRET=1)

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="the interpreter's patch only")


@triton.jit
def _doubled(x):
    return x * 2


@triton.jit
def _no_helper_kernel(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    values = offs.to(tl.float32) * 8
    tl.store(out_ptr + offs, tl.where(tl.sum(values, axis=0) > 0, values, -1.0))  # tl.sum: a helper of Triton's


@triton.jit
def _helper_kernel(out_ptr, N: tl.constexpr):
    offs = tl.arange(0, N)
    values = offs.to(tl.float32)
    for _ in range(3):
        values = _doubled(values)
    tl.store(out_ptr + offs, tl.where(tl.sum(values, axis=0) > 0, values, -1.0))


def _walks(monkeypatch, kernel, grid: int) -> tuple[int, torch.Tensor]:
    # how many times a launch walked a module's members, and what it stored (after a first launch, which also
    # rewrites each function it meets once)
    kernel[(grid,)](torch.zeros(8), 8)
    calls = []
    walk = inspect.getmembers

    def counted(*args, **kwargs):
        calls.append(1)
        return walk(*args, **kwargs)

    monkeypatch.setattr(inspect, "getmembers", counted)
    out = torch.zeros(8)
    kernel[(grid,)](out, 8)
    monkeypatch.setattr(inspect, "getmembers", walk)
    return len(calls), out


def test_helper_calls_do_not_walk_the_language_again(monkeypatch):
    once, plain = _walks(monkeypatch, _no_helper_kernel, 1)
    helped, out = _walks(monkeypatch, _helper_kernel, 4)  # four programs, three more helper calls each
    assert once > 0
    assert helped == once  # the same modules walked once each, however many helper calls
    assert torch.equal(out, plain) and torch.equal(out, torch.arange(8.0) * 8)


def test_the_language_is_restored_after_a_launch():
    out = torch.zeros(8)
    _helper_kernel[(2,)](out, 8)
    assert tl.core.is_builtin(tl.where) and tl.core.is_builtin(tl.arange)  # not left wrapped for the interpreter
    assert torch.equal(out, torch.arange(8.0) * 8)
