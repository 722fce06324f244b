"""The tree kernels as they were before the race after two rejected children ran from candidates, to time beside
today's in one process.

``--impl results/h200-tree-candidates/before.py:triton_before`` is specbench's Triton backend with one change: a
tree call launches 5e5a053's tree kernels (``specbench/kernels/tree.py`` there: the race after a place's rejected
children always takes its own pass over the rows), through today's launcher, whose arguments those kernels take
unchanged. ``run.sh`` writes that file to ``.old/tree_before.py`` (``git show``). Every other call is today's code.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch

_SPEC = importlib.util.spec_from_file_location("tree_before", Path(".old/tree_before.py"))
before = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(before)
_KERNELS = {"_TREE": before._verify_tree_kernel, "_TREE_ROWS": before._tree_rows_kernel,
            "_TREE_FINISH": before._tree_finish_kernel}


class _LauncherBefore(launch._Launcher):
    # the kernels before take every constexpr today's launcher passes but CAND_GROUPS and CANDIDATES
    def __call__(self, grid, args, num_warps, stream, **constexprs):
        constexprs.pop("CAND_GROUPS", None)
        constexprs.pop("CANDIDATES", None)
        super().__call__(grid, args, num_warps, stream, **constexprs)


_LAUNCHERS = {name: _LauncherBefore(kernel) for name, kernel in _KERNELS.items()}


def _prepare(kwargs):
    step = BUILT_IN["triton"].prepare(kwargs)

    def step_before():
        today = {name: getattr(launch, name) for name in _LAUNCHERS}
        for name, launcher in _LAUNCHERS.items():
            setattr(launch, name, launcher)
        try:
            return step()
        finally:
            for name, launcher in today.items():
                setattr(launch, name, launcher)

    return step_before


triton_before = replace(BUILT_IN["triton"], name="triton-before",
                        description="Triton, the tree kernels before the race from candidates (5e5a053)",
                        prepare=_prepare, source="results/h200-tree-candidates/before.py:triton_before")
