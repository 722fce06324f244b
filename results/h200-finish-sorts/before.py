"""The split histogram path's finish step as it was before its lists were sorted at the length that holds them, to
time beside today's in one process.

``--impl results/h200-finish-sorts/before.py:triton_before`` is specbench's Triton backend with one change: the split
histogram path launches 495af7f's ``_split_histogram_kernel`` (``specbench/kernels/histogram.py`` there: a list of
more than 128 candidates sorted at the list's capacity, 1,024), through today's launcher, whose arguments that kernel
takes unchanged. ``run.sh`` expects that file at ``.old/histogram_before.py`` (``git show
495af7f:specbench/kernels/histogram.py``). Every other launch is today's code.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace
from pathlib import Path
from unittest import mock

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch

_SPEC = importlib.util.spec_from_file_location("histogram_before", Path(".old/histogram_before.py"))
before = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(before)
_LAUNCHER = launch._Launcher(before._split_histogram_kernel)


def _prepare(kwargs):
    step = BUILT_IN["triton"].prepare(kwargs)

    def step_before():
        with mock.patch.object(launch, "_SPLIT_HISTOGRAM", _LAUNCHER):
            return step()

    return step_before


triton_before = replace(BUILT_IN["triton"], name="triton-before",
                        description="Triton, the split histogram path's kernel before its lists' sorts by length "
                                    "(495af7f)",
                        prepare=_prepare, source="results/h200-finish-sorts/before.py:triton_before")
