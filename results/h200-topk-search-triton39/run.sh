#!/usr/bin/env bash
# The top-k path's cutoff search under Triton 3.6 and 3.9 (issue 20), on the GPU machine from
# the repository root, after results/h200-triton39/run.sh's `install` on the same warm machine (Triton 3.9 unpacked
# to /tmp/site39; run.sh there says how the pieces travel), with OUT set:
#   bash results/h200-topk-search-triton39/run.sh search   # search_now.py under each Triton: search-3.6.txt, -3.9.txt
#   bash results/h200-topk-search-triton39/run.sh kernels  # top_k 50 + top_p 0.9 at B = 1 and 8, the launcher's own
#                                                          # path under each Triton (kernels-3.6/, kernels-3.9/)
set -uo pipefail
out=${OUT:?set OUT to the folder for the results}
triton36=$(env -u PYTHONPATH python3 -c 'import os, triton; print(os.path.dirname(triton.__file__))')
site=${SITE39:-/tmp/site39}
for step in "$@"; do
  case $step in
    search)
      PYTHONPATH=$PWD timeout ${LIMIT:-240} python3 results/h200-topk-search-triton39/search_now.py \
        > "$out/search-3.6.txt" 2>&1; echo "search 3.6 exit $?"
      PYTHONPATH=$site:$PWD TRITON_BACKENDS_IN_TREE=1 TRITON_PTXAS_BLACKWELL_PATH=$triton36/backends/nvidia/bin/ptxas \
        timeout ${LIMIT:-240} python3 results/h200-topk-search-triton39/search_now.py > "$out/search-3.9.txt" 2>&1
      echo "search 3.9 exit $?"; tail -n 4 "$out"/search-3.*.txt ;;
    kernels)
      for version in 3.6 3.9; do
        mkdir -p "$out/kernels-$version"
        if [ $version = 3.9 ]; then export SITE=$site TRITON_BACKENDS_IN_TREE=1 \
          TRITON_PTXAS_BLACKWELL_PATH=$triton36/backends/nvidia/bin/ptxas; fi
        OUT="$out/kernels-$version" IMPLS=triton KNOBS="--top-k 50 --top-p 0.9" BATCHES="1 8" LIMIT=${LIMIT:-150} \
          bash results/h200-histogram-variants/run.sh time
      done ;;
    *) echo "usage: run.sh search|kernels ..." >&2; exit 2 ;;
  esac
done
