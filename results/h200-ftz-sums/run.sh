#!/usr/bin/env bash
# The masses only summed by one instruction (FTZ_SUMS, the launcher's own since cb52644: `triton`) beside tl.exp
# (-noftz, the launcher's before), and the gather's places reserved a chunk at a time (-reserve), on the GPU machine
# from the repository root with OUT set (issue 20). One call, under the machine's Triton 3.6:
#   bash results/h200-ftz-sums/run.sh first    # at once: the truncation GPU tests (tests.txt) and every shape of
#                                              # `time` compiled with the sanitizers' lists workload; then top_p 0.95
#                                              # at B = 8, 64, 256, 512, draft logits and probs, side by side
#   bash results/h200-ftz-sums/run.sh sanitize # results/h200-stop-row/run.sh sanitize (--part lists, 18 runs)
# (IMPLS, BATCHES, WARM_LIMIT, TIME_LIMIT, CHECK_LIMIT as in results/h200-stop-row/run.sh)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-noftz,$H-reserve} BATCHES=${BATCHES:-8 64 256 512}
for step in "$@"; do
  case $step in
    first)
      LIMIT=${CHECK_LIMIT:-300} bash results/h200-histogram-variants/run.sh check > "$out/check.txt" 2>&1 &
      mkdir -p "$out/w"
      for i in 1 3 5 7 9 11; do
        timeout 200 python3 tests/sanitize_kernels.py --workload --part lists --shard $i/12 > "$out/w/l-$i.txt" 2>&1 &
      done
      LIMIT=${WARM_LIMIT:-240} bash results/h200-histogram-variants/run.sh warm; wait
      tail -n 1 "$out"/w/l-*.txt > "$out/lists-workload.txt"; rm -rf "$out/w"; cat "$out/check.txt"
      LIMIT=${TIME_LIMIT:-60} bash results/h200-histogram-variants/run.sh time ;;
    sanitize) bash results/h200-stop-row/run.sh sanitize ;;
    *) echo "usage: run.sh first|sanitize ..." >&2; exit 2 ;;
  esac
done
