"""The tree kernels as they were before the masses' last program wrote the tokens from the slices' values (e554581's
``specbench/kernels/tree.py``), to time beside them in one process: ``--impl
results/h200-tree-masses-tail/before.py:triton_before``, specbench's Triton backend whose tree calls launch that file's
kernels through today's launcher (``tests/kernel_versions.py``; today's scratch is larger, which that file does not
read). ``run.sh`` says how to write the file to ``.old/tree_before_tail.py`` (``TREE_BEFORE`` names another path).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_before = with_tree_kernels(
    "triton-before", os.environ.get("TREE_BEFORE", ".old/tree_before_tail.py"),
    "Triton, the tree kernels before the masses' tail",
    "results/h200-tree-masses-tail/before.py:triton_before")
