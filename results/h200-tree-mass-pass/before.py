"""The tree kernels as they were before the passes over a row took p and q as products and the race candidates' ratios
by a one-instruction reciprocal, to time beside them in one process.

``--impl results/h200-tree-mass-pass/before.py:triton_before`` is specbench's Triton backend with one change: a tree
call launches d28e7c0's tree kernels (``specbench/kernels/tree.py`` there: p and q divided by their sums token by
token, the ratios divided by E), through today's launcher, whose arguments those kernels take unchanged
(``tests/kernel_versions.py``). ``run.sh`` says how to write that file to ``.old/tree_before_mass_pass.py`` (``git
show``; ``TREE_BEFORE`` names another path). Every other call is today's code.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_before = with_tree_kernels(
    "triton-before", os.environ.get("TREE_BEFORE", ".old/tree_before_mass_pass.py"),
    "Triton, the tree kernels before their passes took products for quotients",
    "results/h200-tree-mass-pass/before.py:triton_before")
