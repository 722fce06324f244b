#!/usr/bin/env bash
# Each request's decisions taken by its last program to arrive of the launch before them instead of by a launch of
# their own (issue 20; FOLD in draft_bounds.py, the bounds pass, and in histogram.py, the first level; the launch
# variants -fold / -nofold; the launcher folds up to launch.DECISION_FOLD_MAX_BATCH requests, from this folder's
# timings). On the GPU machine from the repository root with OUT set, in this order:
#   bash results/h200-decision-fold/run.sh time      # top_p 0.95, L = 3, target logits, draft logits and probs, graph:
#                                                    # the launcher (`triton`) beside triton-histogram-4096x1024x4-fold
#                                                    # (the launcher's own ways with the decisions folded) at B = 1, 2,
#                                                    # 4 (Llama 3, K = 3: the first level's decisions, and from draft
#                                                    # logits the bounds' from B = 3) and at B = 8, 64, 256, 512 (the
#                                                    # issue's shapes; the bounds pass in rounds from 128 requests,
#                                                    # one decision launch a slot folded)
#   bash results/h200-decision-fold/run.sh check     # the truncation GPU tests, CHECK_SHARDS (8) runs at once
#   bash results/h200-decision-fold/run.sh sanitize  # the lists workload (both folds in it) under the three tools
#   bash results/h200-decision-fold/run.sh sanitize-folds  # its folded calls alone (part folds), three tools
# (LIMIT: seconds for each timed run; WARM_LIMIT for the compiling runs; CHECK_LIMIT for each test shard; SMALL: the
# Llama 3 batches, default 1 2 4, empty for none; BATCHES: the shapes, default 8 64 256 512)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
source results/gpu-lib.sh
H=triton-histogram-4096x1024x4
impls=${IMPLS:-triton,$H-fold}
K="python3 -m specbench --format plain kernels --no-charts --timer graph --mode probabilistic --target logits -l 3
   --top-p 0.95 --draft logits,probs -k 3 --model llama3"
for step in "$@"; do
  case $step in
    time)
      scratch=$(mktemp -d)
      for b in ${SMALL-1 2 4}; do
        for impl in ${impls//,/ }; do
          timeout ${WARM_LIMIT:-200} $K --max-ms 1 --impl $impl -b $b -o $scratch/$b-$impl > $scratch/$b-$impl.txt 2>&1 &
        done
      done
      IMPLS=$impls LIMIT=${WARM_LIMIT:-200} bash results/h200-histogram-variants/run.sh warm &
      wait
      write_machine "$out/machine.txt"
      for b in ${SMALL-1 2 4}; do
        timeout ${LIMIT:-100} $K --max-ms 40 --impl $impls -b $b -o "$out/small" --resume >> "$out/small.txt" 2>&1
        echo "B=$b exit $?"
      done
      IMPLS=$impls LIMIT=${LIMIT:-100} bash results/h200-histogram-variants/run.sh time ;;
    check)
      check_tests "$out/tests" ${CHECK_LIMIT:-300} ${CHECK_SHARDS:-8} tests/test_exactness_truncation.py \
        tests/test_truncation_kernels.py tests/test_launch.py ;;
    sanitize)
      bash results/h200-bracket-race/run.sh sanitize ;;
    sanitize-folds)
      sanitize_float32 folds "$out" ;;
    *) echo "usage: run.sh time|check|sanitize|sanitize-folds ..." >&2; exit 2 ;;
  esac
done
