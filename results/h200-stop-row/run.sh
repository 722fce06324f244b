#!/usr/bin/env bash
# The split histogram path's programs taking each request's stop row, then the rows after it (-stoprow), beside the
# launcher's own way (issue 20), on the GPU machine from the repository root with OUT set (one call, in this order):
#   bash results/h200-stop-row/run.sh time       # both at every shape at --max-ms 1 (compiled), with the sanitizers'
#                                                # lists workload; then top_p 0.95 at B = 8, 64, 256, 512, draft logits
#                                                # and probs, side by side (results/h200-histogram-variants/run.sh)
#   bash results/h200-stop-row/run.sh sanitize   # tests/sanitize_kernels.py --part lists (its rows decided from the
#                                                # bounds run -stoprow's launches too) under memcheck, initcheck and
#                                                # racecheck, six shards each, all at once: lists-summary.txt
#   bash results/h200-stop-row/run.sh breakdown  # each launch's time at B = 256, -stoprow, draft logits and probs
# (IMPLS and BATCHES replace the implementations and batches `time` runs, WARM_LIMIT and TIME_LIMIT its seconds for
# the compiles and a batch's timings; BREAKDOWN the variant `breakdown` runs)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin PYTHONPATH=$PWD
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-stoprow} KNOBS="--top-p 0.95" BATCHES=${BATCHES:-8 64 256 512}
shards="1 3 5 7 9 11"  # (of 12: the float32 groups, the only ones the lists workload runs)
for step in "$@"; do
  case $step in
    time)
      mkdir -p "$out/w"
      for i in $shards; do
        timeout 200 python3 tests/sanitize_kernels.py --workload --part lists --shard $i/12 > "$out/w/l-$i.txt" 2>&1 &
      done
      LIMIT=${WARM_LIMIT:-200} bash results/h200-histogram-variants/run.sh warm; wait
      tail -n 1 "$out"/w/l-*.txt > "$out/lists-workload.txt"; rm -rf "$out/w"
      LIMIT=${TIME_LIMIT:-60} bash results/h200-histogram-variants/run.sh time ;;
    sanitize)
      mkdir -p "$out/s"
      for tool in memcheck initcheck racecheck; do
        for i in $shards; do
          timeout 150 python3 tests/sanitize_kernels.py --part lists --tools $tool --shard $i/12 \
            --out "$out/s/$tool-$i" > "$out/s/$tool-$i.txt" 2>&1 &
        done
      done
      wait
      for f in "$out"/s/*.txt; do echo "$(basename $f .txt): $(tail -n 1 $f)"; done > "$out/lists-summary.txt"
      echo "$(grep -c clean "$out/lists-summary.txt") of 18 clean" ;;
    breakdown)
      for draft in logits probs; do
        variant=${BREAKDOWN:-$H-stoprow}
        timeout 60 python3 tests/gpu_kernel_breakdown.py --batch 256 --k 7 --model qwen3 --draft $draft \
          --top-p 0.95 --calls 10 --impl $variant >> "$out/breakdown-${variant#$H-}.txt" 2>&1
        echo "breakdown $draft exit $?"
      done ;;
    *) echo "usage: run.sh time|sanitize|breakdown ..." >&2; exit 2 ;;
  esac
done
