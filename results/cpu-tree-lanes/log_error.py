"""How far the race candidates' E = -log u (`_neg_log_candidate`, degree-6 polynomial, of the tree in `lanes.patch`)
lies from the exact value, over every uniform `rng.uniform_of` gives (u = (2k + 1) / 2**24, k < 2**23): computed by
the kernel function itself under the interpreter (every product and sum rounded to float32, as numpy does), and in a
float32 emulation of the fused multiply-adds ptxas makes of it (each fma's exact product and sum taken in long
double, then rounded once: off by an ulp at worst where a sum falls exactly between two floats). Prints the largest
relative error of each against float64 -log u, and of today's `rng.neg_log_of_uniform` for scale. Run with the
patched tree first on PYTHONPATH."""

from __future__ import annotations

import os

os.environ["TRITON_INTERPRET"] = "1"

import numpy as np
import torch
import triton
import triton.language as tl

from specbench.kernels import tree
from specbench.kernels.rng import neg_log_of_uniform, uniform_of

F32 = np.float32


@triton.jit
def _both(candidate_ptr, exact_ptr, u_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    u = uniform_of(offs.to(tl.uint32) << 9)  # the top 23 bits of a word are k
    tl.store(u_ptr + offs, u)
    tl.store(candidate_ptr + offs, tree._neg_log_candidate(u))
    tl.store(exact_ptr + offs, neg_log_of_uniform(u))


def _fma(a, b, c):
    return (a.astype(np.longdouble) * b.astype(np.longdouble) + c.astype(np.longdouble)).astype(F32)


def _fused(u: np.ndarray, coefficients: list[float]) -> np.ndarray:
    # the candidate's arithmetic with its multiply-adds fused: Horner steps, f + f^2 p, and e (-ln 2) - L
    bits = u.view(np.int32)
    e = (bits - np.int32(0x3F2AAAAB)) >> 23
    f = (bits - (e << 23)).view(F32) - F32(1.0)
    c = [np.full_like(f, F32(x)) for x in coefficients]
    p = _fma(c[-1], f, c[-2])
    for x in reversed(c[:-2]):
        p = _fma(p, f, x)
    return _fma(e.astype(F32), np.full_like(f, F32(-0.6931471805599453)), -_fma(f * f, p, f))


def main() -> None:
    n = 1 << 23
    candidate, ours, u = torch.empty(n), torch.empty(n), torch.empty(n)
    _both[(n // (1 << 16),)](candidate, ours, u, BLOCK=1 << 16)
    u = u.numpy()
    assert np.array_equal(u.astype(np.float64), (2 * np.arange(n) + 1) / 2.0**24)
    exact = -np.log(u.astype(np.float64))
    coefficients = [float(getattr(c, "value", c)) for c in (tree._Q0, tree._Q1, tree._Q2, tree._Q3, tree._Q4,
                                                            tree._Q5, tree._Q6)]
    for name, values in (("candidate E, interpreter", candidate.numpy()), ("candidate E, fused", _fused(u, coefficients)),
                         ("rng.neg_log_of_uniform, interpreter", ours.numpy())):
        relative = np.abs(values.astype(np.float64) - exact) / exact
        print(f"{name}: largest relative error {relative.max():.3e} (at u = {float(u[relative.argmax()]):.9g}), "
              f"smallest E {float(values.min()):.3g}")


if __name__ == "__main__":
    main()
