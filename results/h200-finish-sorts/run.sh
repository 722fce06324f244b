#!/usr/bin/env bash
# The split histogram path's finish step sorting each list at the least of 128, 256, 512 and 1,024 that holds it,
# beside the kernel before (sorting a list of more than 128 at 1,024), through results/h200-histogram-variants/run.sh,
# on the GPU machine from the repository root with OUT set and .old/histogram_before.py carried (before.py):
#   bash results/h200-finish-sorts/run.sh warm time check   # top_p 0.95, B = 1, 8, 64, 256, 512; the GPU tests
set -uo pipefail
export IMPLS=${IMPLS:-triton,results/h200-finish-sorts/before.py:triton_before} KNOBS=${KNOBS:---top-p 0.95}
export BATCHES=${BATCHES:-1 8 64 256 512}
exec bash results/h200-histogram-variants/run.sh "$@"
