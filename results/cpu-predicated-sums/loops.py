"""The innermost SASS loops of the passes that sum masses above a bound (the bounds pass's sums, from target logits and
from target probabilities; the split histogram path's levels and gather, from logits, top_p alone),
compiled for sm_90 by whichever Triton runs this script (no GPU needed), with each token's mass added by a select and
an add (PREDICATED_SUMS 0, the launch variants' -nopred) and by a compare and a predicated add (PREDICATED_SUMS 1,
rows.add_if_above / add_if_ahead). The launcher's shapes, parts a level and last-level counting for this Triton.

    PYTHONPATH=$PWD python3 results/cpu-predicated-sums/loops.py > results/cpu-predicated-sums/loops-3.9.txt
"""

import sys
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import compile_kernels as ck

from specbench.kernels import launch
from specbench.kernels.draft_bounds import _draft_bounds_kernel
from specbench.kernels.histogram import _split_histogram_kernel

PASSES = {(1, 1, 0): "first level", (1, 0, 0): "middle level", (1, 0, 1): "last level", (2, 0, 0): "gather"}


def _passes() -> list[tuple[str, object, dict, int]]:
    # (what, kernel, constexprs, warps): each pass once, top_p alone, the launcher's FTZ_SUMS
    chosen, seen = [], set()
    for kernel, cx, warps, _dtype in ck.variants():
        if kernel is _split_histogram_kernel and not cx["TARGET_PROBS"] and cx["SLICES_PER_PROGRAM"] == 1 \
                and cx["ROWS"] == 0 and not cx["DECIDE"] and cx["BINS"] == launch.HISTOGRAM_BINS:
            what = PASSES.get((cx["STEP"], cx["FIRST"], cx["LAST"]))
            last = cx["STEP"] == 1 and cx["LAST"]
            if what is not None and what not in seen and (not last or cx["ATOMIC"] == int(launch.HISTOGRAM_ATOMIC)):
                seen.add(what)
                chosen.append((what, kernel, {**cx, "HAS_MIN_P": 0, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS)},
                               warps))
        elif kernel is _draft_bounds_kernel and cx["STEP"] == 0:
            what = f"bounds pass, sums, target {'probabilities' if cx['TARGET_PROBS'] else 'logits'}"
            if what not in seen:
                seen.add(what)
                chosen.append((what, kernel, {**cx, "HAS_MIN_P": 0, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS)},
                               warps))
    return chosen


def main() -> None:
    print(f"Triton {triton.__version__}, sm_90, {launch.HISTOGRAM_BINS} parts a level, last level by "
          f"{'atomics' if launch.HISTOGRAM_ATOMIC else 'tl.histogram'}")
    for what, kernel, cx, warps in _passes():
        ck.print_loops_both_ways(what, kernel, cx, warps, "PREDICATED_SUMS", 6)


if __name__ == "__main__":
    main()
