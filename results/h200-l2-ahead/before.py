"""The fused truncated step without and with other amounts of the next row asked into L2 during each search, to
time beside the working tree's (128 KiB) in one process.

Each name is specbench's Triton backend with one change: a truncated call launches another copy of the prepass and
the truncated step through today's launcher (``tests/kernel_versions.py``); every other call is the working tree's
code. The copies (carried in ``.old/s50``):

- ``triton_head``: 9d3d2b6's kernels, no prefetch (``truncation_head.py`` / ``cutoffs_head.py``: ``git show
  9d3d2b6:specbench/kernels/truncation.py`` importing ``git show 9d3d2b6:specbench/kernels/cutoffs.py``);
- ``triton_a64`` and ``triton_a256``: the working tree's ``truncation.py`` with ``AHEAD_BYTES`` 65536 and 262144
  (``truncation_a64.py``, ``truncation_a256.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_truncation_kernels

triton_head = with_truncation_kernels("triton-head", ".old/s50/truncation_head.py",
                                   "Triton, the truncation kernels of 9d3d2b6 (no prefetch)",
                                   "results/h200-l2-ahead/before.py:triton_head")

triton_a64 = with_truncation_kernels("triton-a64", ".old/s50/truncation_a64.py",
                                   "Triton, 64 KiB of the next row asked into L2 during a search",
                                   "results/h200-l2-ahead/before.py:triton_a64")

triton_a256 = with_truncation_kernels("triton-a256", ".old/s50/truncation_a256.py",
                                   "Triton, 256 KiB of the next row asked into L2 during a search",
                                   "results/h200-l2-ahead/before.py:triton_a256")
