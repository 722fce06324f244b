"""The truncation kernels as they were before the group maxima pass loaded each chunk an iteration ahead, to time
beside today's in one process.

``--impl results/h200-pass-prefetch/before.py:triton_before`` is specbench's Triton backend with one change: a
truncated call launches 9fc6ac3's prepass and truncated step (``.old/head/truncation_head.py``: ``git show
9fc6ac3:specbench/kernels/truncation.py`` importing ``.old/head/cutoffs_head.py``, ``git show
9fc6ac3:specbench/kernels/cutoffs.py``; both carried) through today's launcher, whose arguments and constexprs those
kernels take unchanged (``tests/kernel_versions.py``). Every other call is the working tree's code.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import kernel_module, with_kernels

_HEAD = kernel_module(".old/head/truncation_head.py")  # its import of cutoffs_head finds the copy beside it

triton_before = with_kernels(
    "triton-before", {"_PREPASS": _HEAD._truncation_prepass_kernel, "_TRUNCATED": _HEAD._verify_truncated_kernel},
    "Triton, the truncation kernels of 9fc6ac3 (the group maxima pass without loads ahead)",
    "results/h200-pass-prefetch/before.py:triton_before")
