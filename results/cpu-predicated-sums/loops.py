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


def main() -> None:
    print(f"Triton {triton.__version__}, sm_90, {launch.HISTOGRAM_BINS} parts a level, last level by "
          f"{'atomics' if launch.HISTOGRAM_ATOMIC else 'tl.histogram'}")
    for what, kernel, cx, warps in ck.summing_passes():  # (at the launcher's FTZ_SUMS)
        ck.print_loops_both_ways(what, kernel, {**cx, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS)}, warps,
                                 "PREDICATED_SUMS", 6)


if __name__ == "__main__":
    main()
