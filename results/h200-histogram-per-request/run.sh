#!/usr/bin/env bash
# The split histogram path with one program per request, side and slice taking every row of its request in turn
# (the launcher's own where the drafts were decided from one pass's bounds) beside one program per row and slice
# (-percell, the launcher's before), through results/h200-histogram-variants/run.sh, on the GPU machine from the
# repository root with OUT set:
#   bash results/h200-histogram-per-request/run.sh warm time check   # top_p 0.95, B = 8, 64, 256, draft logits/probs
#   bash results/h200-histogram-per-request/run.sh sanitize          # --part radix under the three tools
set -uo pipefail
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-percell} KNOBS=${KNOBS:---top-p 0.95} BATCHES=${BATCHES:-8 64 256}
exec bash results/h200-histogram-variants/run.sh "$@"
