"""Main's tree kernels before the masses' tail (81b9cb7's ``specbench/kernels/tree.py``, written to
``.old/tree_main.py`` by ``git show 925035f:specbench/kernels/tree.py``; ``TREE_MAIN`` names another path), to time
beside today's in one process: ``--impl results/h200-tree-masses-tail/landed/impls.py:triton_main``. It ran as
``.old/impls.py``, with the same backend and name.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))

from kernel_versions import with_tree_kernels

triton_main = with_tree_kernels(
    "triton-main", os.environ.get("TREE_MAIN", ".old/tree_main.py"), "Triton, main's tree kernels (81b9cb7)",
    "results/h200-tree-masses-tail/landed/impls.py:triton_main")
