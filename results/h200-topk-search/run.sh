#!/usr/bin/env bash
# The top-k path's cutoff search (specbench/kernels/cutoffs.py, top_k_from_groups) in variants, on the GPU machine from
# the repository root with OUT set:
#   bash results/h200-topk-search/run.sh variants  # search_variants.py: the variants checked against each other bit for
#                                                  # bit, then timed one program per row
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PYTHONPYCACHEPREFIX=${PYTHONPYCACHEPREFIX:-/tmp/specbench-pycache}
unset PYTHONDONTWRITEBYTECODE
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    variants)
      timeout ${LIMIT:-300} python3 results/h200-topk-search/search_variants.py > "$out/variants.txt" 2>&1
      echo "variants exit $?"; tail -n 12 "$out/variants.txt" ;;
    *) echo "usage: run.sh variants" >&2; exit 2 ;;
  esac
done
