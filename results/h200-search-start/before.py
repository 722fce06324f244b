"""The truncation kernels as committed at fde41ff (the cutoff search's bisections from the top bit), to time beside
the working tree's in one process.

``--impl results/h200-search-start/before.py:triton_before`` is specbench's Triton backend with one change: a
truncated call launches fde41ff's prepass and truncated step (``.old/s49/truncation_head.py``: ``git show
fde41ff:specbench/kernels/truncation.py`` importing ``.old/s49/cutoffs_head.py``, ``git show
fde41ff:specbench/kernels/cutoffs.py``; both carried) through today's launcher, whose arguments and constexprs those
kernels take unchanged (``tests/kernel_versions.py``). Every other call is the working tree's code.

Two halves of the change, to tell which one moved a batch: ``triton_d`` starts only the second bisection (the k-th
largest gathered value) from the bits it shares with the first's bound, ``triton_b`` only the first (the groups'
bound) from the largest key's binade or eight binades (``.old/s49/cutoffs_d.py`` and ``cutoffs_b.py``: the working
tree's ``cutoffs.py`` with fde41ff's bisection, as ``_kth_largest_bound_old``, in the other place;
``truncation_d.py`` and ``truncation_b.py`` import them).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_truncation_kernels

# (truncation_head.py's import of cutoffs_head finds the copy beside it)
triton_before = with_truncation_kernels(
    "triton-before", ".old/s49/truncation_head.py",
    "Triton, the truncation kernels of fde41ff (the cutoff search's bisections from the top bit)",
    "results/h200-search-start/before.py:triton_before")

triton_d = with_truncation_kernels(
    "triton-d", ".old/s49/truncation_d.py",
    "Triton, the second bisection started from shared bits, the first from the top bit",
    "results/h200-search-start/before.py:triton_d")

triton_b = with_truncation_kernels(
    "triton-b", ".old/s49/truncation_b.py",
    "Triton, the first bisection started from shared bits, the second from the top bit",
    "results/h200-search-start/before.py:triton_b")
