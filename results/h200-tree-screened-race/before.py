"""The tree kernels before one program's residual race was screened, to time beside them in one process.

``--impl results/h200-tree-screened-race/before.py:triton_unscreened`` is specbench's Triton backend with one
change: a tree call launches 1204975's tree kernels (``specbench/kernels/tree.py`` there: the residual race over
the whole row takes every chunk's logarithms), through today's launcher, whose arguments those kernels take
unchanged (``tests/kernel_versions.py``). ``run.sh`` writes that file to ``.old/tree_unscreened.py`` (``git
show``). Every other call is today's code.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_unscreened = with_tree_kernels(
    "triton-unscreened", ".old/tree_unscreened.py",
    "Triton, the tree kernels before one program's residual race was screened",
    "results/h200-tree-screened-race/before.py:triton_unscreened")
