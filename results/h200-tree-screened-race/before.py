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

from kernel_versions import kernel_module, with_kernels

_UNSCREENED = kernel_module(".old/tree_unscreened.py")

triton_unscreened = with_kernels(
    "triton-unscreened", {"_TREE": _UNSCREENED._verify_tree_kernel, "_TREE_ROWS": _UNSCREENED._tree_rows_kernel,
                          "_TREE_FINISH": _UNSCREENED._tree_finish_kernel},
    "Triton, the tree kernels before one program's residual race was screened",
    "results/h200-tree-screened-race/before.py:triton_unscreened")
