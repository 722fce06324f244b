"""Other versions of specbench's Triton kernels, launched through today's launcher, to time beside today's kernels
in one process (the ``before.py`` of a results folder, given to ``specbench kernels --impl FILE:NAME``).

``kernel_module(path)`` loads a file of kernels (an earlier commit's copy, say); ``with_kernels(name, kernels,
description, source)`` is specbench's Triton backend under another name whose calls launch the given kernels in
place of the launcher's own (by the launcher's names: ``{"_TRUNCATED": module._verify_truncated_kernel}``), each with
the arguments and constexprs today's launcher passes, for the length of one call; ``with_truncation_kernels(name,
path, description, source)`` does so with the truncation prepass and step of the file at ``path``, and
``with_tree_kernels(name, path, description, source)`` with the tree kernels (one program per request, and the split
path's rows and finish kernels) of the file at ``path``.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import replace
from pathlib import Path
from types import ModuleType

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch


def kernel_module(path: str) -> ModuleType:
    """The module of kernels in the file at ``path``; its folder goes on ``sys.path`` first, so that the file may
    import copies of other modules kept beside it."""
    file = Path(path).resolve()
    sys.path.insert(0, str(file.parent))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def with_kernels(name: str, kernels: dict[str, object], description: str, source: str):
    """specbench's Triton backend named ``name`` whose calls launch ``kernels`` (launcher name -> Triton kernel)."""
    launchers = {attribute: launch._Launcher(kernel) for attribute, kernel in kernels.items()}

    def prepare(kwargs):
        step = BUILT_IN["triton"].prepare(kwargs)

        def step_with_kernels():
            today = {attribute: getattr(launch, attribute) for attribute in launchers}
            for attribute, launcher in launchers.items():
                setattr(launch, attribute, launcher)
            try:
                return step()
            finally:
                for attribute, launcher in today.items():
                    setattr(launch, attribute, launcher)

        return step_with_kernels

    return replace(BUILT_IN["triton"], name=name, description=description, prepare=prepare, source=source)


def with_truncation_kernels(name: str, path: str, description: str, source: str):
    """specbench's Triton backend named ``name`` whose truncated calls launch the prepass and the truncated step of the
    kernel file at ``path`` (``kernel_module``)."""
    module = kernel_module(path)
    return with_kernels(name, {"_PREPASS": module._truncation_prepass_kernel,
                               "_TRUNCATED": module._verify_truncated_kernel}, description, source)


def with_tree_kernels(name: str, path: str, description: str, source: str):
    """specbench's Triton backend named ``name`` whose tree calls launch the tree kernels of the kernel file at ``path``
    (``kernel_module``)."""
    module = kernel_module(path)
    return with_kernels(name, {"_TREE": module._verify_tree_kernel, "_TREE_ROWS": module._tree_rows_kernel,
                               "_TREE_FINISH": module._tree_finish_kernel}, description, source)
