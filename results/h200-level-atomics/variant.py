"""The split histogram path with its last level counting the tokens inside its window by integer atomics on the
cell's counts instead of ``tl.histogram`` (``level_atomics.patch``; the patched copy of
``specbench/kernels/histogram.py`` is carried as ``.old/s51/histogram_atomic.py``), to time beside the working
tree's kernels in one process: ``--impl results/h200-level-atomics/variant.py:triton_atomic``. Every other launch is
the working tree's. The counts are integers, the same in any order, so the summaries are the same bit for bit
(``check_atomic.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from kernel_versions import kernel_module, with_kernels

PATCHED = ".old/s51/histogram_atomic.py"


def patched_kernel():
    return kernel_module(PATCHED)._split_histogram_kernel


triton_atomic = with_kernels("triton-atomic", {"_SPLIT_HISTOGRAM": patched_kernel()},
                             "Triton, the histogram path's last level counted by atomics",
                             "results/h200-level-atomics/variant.py:triton_atomic")
