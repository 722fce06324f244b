"""The split histogram path's gather compiled for sm_90 by whichever Triton runs this script (no GPU needed), taking
its candidates' places in the list by one atomic a candidate (GATHER_RESERVE 0, the launcher's) and by one a chunk
(GATHER_RESERVE 1, the launch variants' -reserve): its loop's instructions, atomics, barriers and shuffles, those of
the path every chunk takes (to the first branch) and the registers a thread. Target logits, top_p alone, the
launcher's shape and summed masses.

    PYTHONPATH=$PWD python3 results/cpu-gather-reserve/loops.py > results/cpu-gather-reserve/loops-3.9.txt
"""

import sys
from collections import Counter
from pathlib import Path
from tempfile import TemporaryDirectory

import triton

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cpu-ftz-sums"))
import compile_kernels as ck
import loops as summed  # results/cpu-ftz-sums/loops.py: the passes at the launcher's shape

from specbench.kernels import launch


def main() -> None:
    print(f"Triton {triton.__version__}, sm_90")
    for what, kernel, cx, warps in summed._passes():
        if what != "gather":
            continue
        for reserve in (0, 1):
            constexprs = {**cx, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS), "GATHER_RESERVE": reserve}
            compiled = ck.compile_kernel(kernel, constexprs, warps, "fp32", 90)
            with TemporaryDirectory() as folder:
                cubin = Path(folder) / "kernel.cubin"
                cubin.write_bytes(compiled.asm["cubin"])
                loop = [op.split(".")[0] for op in ck.innermost_loops(cubin)[0]]
                usage = ck.resources(cubin)
            every = loop[:loop.index("BRA")]
            whole, path = Counter(loop), Counter(every)
            print(f"GATHER_RESERVE {reserve}: registers {usage.get('reg')}; loop {len(loop)} instructions (ATOMG "
                  f"{whole['ATOMG']}, BAR {whole['BAR']}, SHFL {whole['SHFL']}); every chunk's path {len(every)} "
                  f"(BAR {path['BAR']}, STS {path['STS']}, LDS {path['LDS']})")


if __name__ == "__main__":
    main()
