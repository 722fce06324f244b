"""The tree kernels as they were before a one-hot draft's rejection left its mass without a pass, to time beside
them in one process.

``--impl results/h200-tree-one-hot/before.py:triton_before`` is specbench's Triton backend with one change: a
tree call launches 4e366ed's tree kernels (``specbench/kernels/tree.py`` there: after every rejected child the next
mass is a sum over the row, a pass in the walk's program or, on the split path, a stop for the masses part),
through today's launcher, whose arguments those kernels take unchanged (``tests/kernel_versions.py``). ``run.sh``
writes that file to ``.old/tree_before_one_hot.py`` (``git show``; ``TREE_BEFORE`` names another path). Every
other call is today's code. (Rewritten onto ``tests/kernel_versions.py`` after the run; the same launch.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_before = with_tree_kernels(
    "triton-before", os.environ.get("TREE_BEFORE", ".old/tree_before_one_hot.py"),
    "Triton, the tree kernels before a one-hot draft's mass took no pass",
    "results/h200-tree-one-hot/before.py:triton_before")
