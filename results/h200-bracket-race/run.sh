#!/usr/bin/env bash
# The stop row's race tried from the first level's bracket (issue 20, specbench/kernels/bracket_race.py), on the GPU
# machine from the repository root with OUT set, in this order:
#   bash results/h200-bracket-race/run.sh time      # results/h200-histogram-variants/run.sh warm, then time: top_p 0.95
#                                                   # at B = 8, 64, 256, 512, draft logits and probs, the launcher's
#                                                   # `triton` (the race tried) beside -race and -norace
#   bash results/h200-bracket-race/run.sh check     # the truncation GPU tests
#   bash results/h200-bracket-race/run.sh sanitize  # the lists workload (crowded rows, drafts decided first: the race
#                                                   # launch and the step after it) under memcheck, initcheck and
#                                                   # racecheck, six float32 shards each, all at once
# (WARM_LIMIT, TIME_LIMIT, CHECK_LIMIT, TOOL_LIMIT: seconds; IMPLS and BATCHES replace the implementations and batches)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-race,$H-norace} BATCHES=${BATCHES:-8 64 256 512}
for step in "$@"; do
  case $step in
    time)
      LIMIT=${WARM_LIMIT:-220} bash results/h200-histogram-variants/run.sh warm
      LIMIT=${TIME_LIMIT:-75} bash results/h200-histogram-variants/run.sh time ;;
    check)
      write_machine "$out/machine.txt"
      timeout ${CHECK_LIMIT:-300} python3 -m pytest -q -p no:cacheprovider tests/test_exactness_truncation.py \
        tests/test_truncation.py tests/test_launch.py tests/test_bench_truncation.py > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    sanitize)
      sanitize_float32 lists "$out" ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
