#!/usr/bin/env bash
# What is to make this folder, on the GPU machine from the repository root with OUT set (one call each):
#   bash results/h200-recheck/run.sh check   # the GPU test files of every kernel (two pytest processes) beside the
#                                            # chain kernels' sanitizer workload (--part all: one program and split,
#                                            # every mode) under memcheck, initcheck and racecheck, three shards each
#                                            # (LIMIT seconds per process)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
P="python3 -m pytest -q -p no:cacheprovider --durations=15"
case ${1:-} in
  check)
    timeout ${LIMIT:-480} $P tests/test_probabilistic.py tests/test_greedy.py tests/test_synthetic.py \
      tests/test_target_probs.py tests/test_launch.py tests/test_races.py tests/test_spread.py tests/test_sweep.py \
      > "$out/pytest-chains.txt" 2>&1 &
    timeout ${LIMIT:-480} $P tests/test_truncation.py tests/test_truncation_kernels.py tests/test_verify_api.py \
      tests/test_methods.py tests/test_trees_triton.py tests/test_implementations.py tests/test_bench.py \
      > "$out/pytest-rest.txt" 2>&1 &
    for tool in memcheck initcheck racecheck; do for shard in 1 2 3; do
      timeout ${LIMIT:-480} python3 tests/sanitize_kernels.py --part all --tools $tool --shard $shard/3 \
        --out "$out/all-$tool-$shard" > "$out/all-$tool-$shard.txt" 2>&1 &
    done; done
    wait; tail -n 2 "$out"/pytest-*.txt; tail -n 1 "$out"/all-*.txt ;;
  *) echo "usage: run.sh check" >&2; exit 2 ;;
esac
