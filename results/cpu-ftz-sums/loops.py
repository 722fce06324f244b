"""The innermost SASS loops of the passes over a row whose masses are only summed (the bounds pass's sums and the split
histogram path's levels and gather, target logits, top_p alone: no min_p), compiled for sm_90 by whichever Triton runs
this script (no GPU needed), with those masses taken by tl.exp (FTZ_SUMS 0, the launch variants' -noftz) and by
rows.exp_in_sum (FTZ_SUMS 1: one ex2.approx.ftz). The launcher's shapes, parts a level and last-level counting for
this Triton.

    PYTHONPATH=$PWD python3 results/cpu-ftz-sums/loops.py > results/cpu-ftz-sums/loops-3.9.txt
"""

import sys
from pathlib import Path

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import compile_kernels as ck

from specbench.kernels import launch


def main() -> None:
    print(f"Triton {triton.__version__}, sm_90, {launch.HISTOGRAM_BINS} parts a level, last level by "
          f"{'atomics' if launch.HISTOGRAM_ATOMIC else 'tl.histogram'}")
    for what, kernel, cx, warps in ck.summing_passes():
        if not what.endswith("probabilities"):  # (FTZ_SUMS takes logits' masses only)
            ck.print_loops_both_ways(what, kernel, cx, warps, "FTZ_SUMS", 5)


if __name__ == "__main__":
    main()
