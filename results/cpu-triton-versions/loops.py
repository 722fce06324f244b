"""The innermost SASS loops of the truncation search's passes over a row, compiled for sm_90 by whichever Triton
runs this script (no GPU needed), to compare Triton versions: the split histogram path's steps (the first, a middle
and the last level, the gather; target logits with truncated draft logits, the launcher's shape) and the bounds
pass's sums. (The largest value's loop of four chunks is unrolled, so it has no loop to show.) A kernel may hold
several innermost loops: each is listed.

    PYTHONPATH=$PWD python3 results/cpu-triton-versions/loops.py > results/cpu-triton-versions/loops-3.9.txt
"""

import sys
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import compile_kernels as ck

from specbench.kernels.draft_bounds import _draft_bounds_kernel
from specbench.kernels.histogram import _split_histogram_kernel

STEPS = {(1, 1, 0, 0): "first level", (1, 0, 0, 0): "middle level",
         (1, 0, 1, 1): "last level (atomics)", (2, 0, 0, 0): "gather"}


def _chosen() -> list[tuple[str, int]]:
    # (what, index in variants()) for the passes above, compiled with min_p ("in": its in-play test) and, where
    # tests/compile_kernels.py has it, without ("out": top_p alone)
    picked = []
    for i, (kernel, cx, _warps, _dtype) in enumerate(ck.variants()):
        if kernel is _split_histogram_kernel and not cx["TARGET_PROBS"] and cx["SLICES_PER_PROGRAM"] == 1 \
                and cx["ROWS"] == 0 and cx["BINS"] == 64 and not cx["DECIDE"] \
                and not cx["SKIP_DECIDED"]:
            what = STEPS.get((cx["STEP"], cx["FIRST"], cx["LAST"], cx["ATOMIC"]))
            if what is not None:
                picked.append((f"{what}, min_p {'in' if cx['HAS_MIN_P'] else 'out'}", i))
        elif kernel is _draft_bounds_kernel and cx["STEP"] == 0 and not cx["TARGET_PROBS"] and cx["ROUNDS"]:
            picked.append(("bounds pass, sums (rounds)", i))
    return picked


def main() -> None:
    print(f"Triton {triton.__version__}, sm_90")
    for what, index in _chosen():
        (_kernel, cx, warps, _dtype), compiled = ck.compile_variant(index, 90)
        with TemporaryDirectory() as folder:
            cubin = Path(folder) / "kernel.cubin"
            cubin.write_bytes(compiled.asm["cubin"])
            loops = ck.innermost_loops(cubin)
            usage = ck.resources(cubin)
        tokens = cx["BLOCK"] // (32 * warps)  # a thread's tokens per iteration
        for number, ops in enumerate(loops, 1):
            kinds = Counter(op.split(".")[0] for op in ops).most_common(6)
            print(f"{what}, loop {number}: {len(ops)} instructions an iteration ({tokens} tokens a thread), registers "
                  f"{usage.get('reg')}; {', '.join(f'{op} {n}' for op, n in kinds)}")


if __name__ == "__main__":
    main()
