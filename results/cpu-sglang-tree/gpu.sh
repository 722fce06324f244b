#!/usr/bin/env bash
# The next step (issue 24): sglang-tree timed beside specbench's tree kernels on a GPU, greedy, on the GPU machine
# from the repository root with OUT set and SGLANG_DIR a folder holding sglang/kernels/ops/speculative/spec_tree.py
# (the GPU machine has no SGLang: carry that file, e.g. SGLANG_DIR=.old/sgl with carry [".old/sgl"]):
#   bash results/cpu-sglang-tree/gpu.sh check   # tests/test_implementations.py's sglang tests and compare.py on the GPU
#   bash results/cpu-sglang-tree/gpu.sh time    # the 2x2 tree beside the chain of its depth and chain:6 (the same
#                                               # rows), B = 1, 8, 64, 256, two acceptance levels, graph timer
set -uo pipefail
export PYTHONPATH=$PWD:${SGLANG_DIR:?set SGLANG_DIR to the folder holding sglang/}
export PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; sha256sum "$SGLANG_DIR"/sglang/kernels/ops/speculative/spec_tree.py; date -u; } \
  > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    check)
      timeout ${LIMIT:-200} python3 -m pytest -q -p no:cacheprovider tests/test_implementations.py -k sglang \
        > "$out/tests.txt" 2>&1; echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      timeout ${LIMIT:-200} python3 results/cpu-sglang-tree/compare.py > "$out/compare.txt" 2>&1
      echo "compare exit $?"; tail -n 1 "$out/compare.txt" ;;
    time)
      timeout ${LIMIT:-400} $S kernels --no-charts --timer graph --max-ms 40 --mode greedy --tree 2x2,chain:6 \
        -b 1,8,64,256 --model llama3 -l 2,full --impl triton,sglang-tree -o "$out/greedy-trees" \
        > "$out/greedy-trees.txt" 2>&1; echo "kernels exit $?" ;;
    *) echo "usage: gpu.sh check|time ..." >&2; exit 2 ;;
  esac
done
