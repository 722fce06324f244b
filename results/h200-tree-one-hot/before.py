"""The tree kernels as they were before a one-hot draft's rejection left its mass without a pass, to time beside
them in one process.

``--impl results/h200-tree-one-hot/before.py:triton_before`` is specbench's Triton backend with one change: a
tree call launches 4e366ed's tree kernels (``specbench/kernels/tree.py`` there: after every rejected child the next
mass is a sum over the row, a pass in the walk's program or, on the split path, a stop for the masses part),
through today's launcher, whose arguments those kernels take unchanged. ``run.sh`` writes that file to
``.old/tree_before_one_hot.py`` (``git show``; ``TREE_BEFORE`` names another path). Every other call is today's
code.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch

_FILE = Path(os.environ.get("TREE_BEFORE", ".old/tree_before_one_hot.py"))
_SPEC = importlib.util.spec_from_file_location("tree_before_one_hot", _FILE)
before = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(before)
_LAUNCHERS = {"_TREE": launch._Launcher(before._verify_tree_kernel),
              "_TREE_ROWS": launch._Launcher(before._tree_rows_kernel),
              "_TREE_FINISH": launch._Launcher(before._tree_finish_kernel)}


def _prepare(kwargs):
    step = BUILT_IN["triton"].prepare(kwargs)

    def before_step():
        today = {name: getattr(launch, name) for name in _LAUNCHERS}
        for name, launcher in _LAUNCHERS.items():
            setattr(launch, name, launcher)
        try:
            return step()
        finally:
            for name, launcher in today.items():
                setattr(launch, name, launcher)

    return before_step


triton_before = replace(BUILT_IN["triton"], name="triton-before",
                        description="Triton, the tree kernels before a one-hot draft's mass took no pass",
                        prepare=_prepare, source="results/h200-tree-one-hot/before.py:triton_before")
