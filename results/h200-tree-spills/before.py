"""Other versions of the tree kernels, to time beside today's in one process.

``--impl results/h200-tree-spills/before.py:triton_before`` is specbench's Triton backend with one change: a tree
call launches d9959e6's tree kernels (``.old/tree_head.py``: ``git show d9959e6:specbench/kernels/tree.py``,
carried) through today's launcher, whose arguments and constexprs those kernels take unchanged.
``before.py:triton_hoisted`` likewise launches ``.old/tree_hoisted.py`` (carried): the tree kernels as committed in
3cbd4c2 (the first sibling's facts read once a pass, the mass summed per token lane in ``_residual_mass``'s order).
In ``hoisted/`` the working tree's own ``triton`` was that code plus the mass summed per lane of 8 tokens first,
not committed. Every other call is the working tree's code.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch


def _variant(name: str, path: str, description: str):
    # specbench's Triton backend whose tree calls launch the tree kernels of the file at `path` (today's launcher)
    spec = importlib.util.spec_from_file_location(name.replace("-", "_"), Path(path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    launchers = {"_TREE": launch._Launcher(module._verify_tree_kernel),
                 "_TREE_ROWS": launch._Launcher(module._tree_rows_kernel),
                 "_TREE_FINISH": launch._Launcher(module._tree_finish_kernel)}

    def prepare(kwargs):
        step = BUILT_IN["triton"].prepare(kwargs)

        def step_there():
            today = {kernel: getattr(launch, kernel) for kernel in launchers}
            for kernel, launcher in launchers.items():
                setattr(launch, kernel, launcher)
            try:
                return step()
            finally:
                for kernel, launcher in today.items():
                    setattr(launch, kernel, launcher)

        return step_there

    return replace(BUILT_IN["triton"], name=name, description=description, prepare=prepare,
                   source=f"results/h200-tree-spills/before.py:{name.replace('-', '_')}")


triton_before = _variant("triton-before", ".old/tree_head.py",
                         "Triton, the tree kernels of d9959e6 (the first sibling's facts read in every chunk)")
triton_hoisted = _variant("triton-hoisted", ".old/tree_hoisted.py",
                          "Triton, the tree kernels with the first sibling's facts read once a pass, r1's mass summed "
                          "per token lane as before")
