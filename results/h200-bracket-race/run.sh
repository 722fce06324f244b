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
      shards="1 3 5 7 9 11"  # (of 12: the float32 groups, the only ones the lists workload runs)
      mkdir -p "$out/w"
      for i in $shards; do
        timeout ${WORK_LIMIT:-150} python3 tests/sanitize_kernels.py --workload --part lists --shard $i/12 \
          > "$out/w/l-$i.txt" 2>&1 &
      done
      wait
      tail -n 1 "$out"/w/l-*.txt > "$out/lists-workload.txt"; rm -rf "$out/w"
      sanitize_shards lists "1/12 3/12 5/12 7/12 9/12 11/12" ${TOOL_LIMIT:-300} "$out/s"
      tar czf "$out/sanitize.tgz" -C "$out" s && rm -rf "$out/s" ;;
    *) echo "usage: run.sh time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
