"""The tree kernels as they were before the finish kernel's tickets became per request (8edaa11's
``specbench/kernels/tree.py``: every program of the finish kernel drew a ticket from one counter), to time beside them
in one process: ``--impl results/h200-tree-tickets/before.py:triton_before``, specbench's Triton backend whose tree
calls launch that file's kernels through today's launcher (``tests/kernel_versions.py``; its counters, 3 B of them
and at least 64, hold that file's 1 + 2 B). ``run.sh`` says how to write the file to ``.old/tree_before_tickets.py``
(``TREE_BEFORE`` names another path).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_before = with_tree_kernels(
    "triton-before", os.environ.get("TREE_BEFORE", ".old/tree_before_tickets.py"),
    "Triton, the tree kernels before per-request tickets",
    "results/h200-tree-tickets/before.py:triton_before")
