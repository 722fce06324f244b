"""A launch variant of the patched tree kernels (README.md), timed beside them: ``--impl
results/h200-tree-masses-tail/variants.py:triton_racer`` launches ``.old/tree_racer.py`` through today's launcher
(``tests/kernel_versions.py``). ``run.sh before``, with the patch applied, writes that file: the patched tree.py
whose masses part returns the racer's slice (-1 for a masses program) in place of its ticket. ptxas then gives the
finish kernel 154 registers and no stack from draft logits, where the version timed beside it takes 128 and 48
bytes of stack.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import with_tree_kernels

triton_racer = with_tree_kernels(
    "triton-racer", os.environ.get("TREE_RACER", ".old/tree_racer.py"),
    "Triton, the masses part returning the racer's slice",
    "results/h200-tree-masses-tail/variants.py:triton_racer")
