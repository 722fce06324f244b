"""The truncation kernels with the top-k path's bisections one and three bits a step, to time beside the working
tree's (two) in one process.

Each name is specbench's Triton backend with one change: a truncated call launches another copy of the prepass and
the truncated step through today's launcher (``tests/kernel_versions.py``); every other call is the working tree's
code. The copies (carried in ``.old/s50``):

- ``triton_head``: 9d3d2b6's kernels, one bit a step (``truncation_head.py`` / ``cutoffs_head.py``: ``git show
  9d3d2b6:specbench/kernels/truncation.py`` importing ``git show 9d3d2b6:specbench/kernels/cutoffs.py``);
- ``triton_b3``: the working tree's with ``BISECT_BITS`` 3 (``truncation_b3.py`` / ``cutoffs_b3.py``);
- ``triton_b3s``: that, with the bisections started from shared bits in the fused step over more than 4096 groups
  too (``cutoffs_b3s.py``: ``summarize_row`` passes ``True`` as ``SHARED_START``).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_truncation_kernels

triton_head = with_truncation_kernels("triton-head", ".old/s50/truncation_head.py",
                                   "Triton, the truncation kernels of 9d3d2b6 (one bit a step)",
                                   "results/h200-bisect-bits/before.py:triton_head")

triton_b3 = with_truncation_kernels("triton-b3", ".old/s50/truncation_b3.py",
                                   "Triton, the top-k path's bisections three bits a step",
                                   "results/h200-bisect-bits/before.py:triton_b3")

triton_b3s = with_truncation_kernels("triton-b3s", ".old/s50/truncation_b3s.py",
                                   "Triton, three bits a step, started from shared bits everywhere",
                                   "results/h200-bisect-bits/before.py:triton_b3s")
