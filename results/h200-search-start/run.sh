#!/usr/bin/env bash
# What made this folder, on the GPU machine from the repository root with OUT set and .old/s49 carried
# (before.py's docstring says what it holds):
#   bash results/h200-search-start/run.sh search    # search_start.py: the row summary of fde41ff and of the working
#                                                   # tree, bit for bit on 528 rows, then each timed alone
#   bash results/h200-search-start/run.sh time      # top_k 50 + top_p 0.9 on issue 20's shapes (graph), the working
#                                                   # tree's kernels beside fde41ff's (before.py), draft logits and
#                                                   # probs; IMPLS, BATCHES
#   bash results/h200-search-start/run.sh check     # the truncation GPU tests
#   bash results/h200-search-start/run.sh sanitize  # the truncation kernels under memcheck, initcheck and racecheck:
#                                                   # groups SHARDS of tests/sanitize_kernels.py --part truncation (21),
#                                                   # one process per group and tool, LIMIT seconds each, at SHAPE
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; date -u; } > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    search)
      timeout ${LIMIT:-200} python3 results/h200-search-start/search_start.py > "$out/search_start.txt" 2>&1
      echo "search exit $?" ;;
    time)
      K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --top-k 50
         --top-p 0.9 --draft logits,probs -o $out/time --resume"
      impls=${IMPLS:-triton,results/h200-search-start/before.py:triton_before}
      for b in ${BATCHES:-1 8 64 256 512}; do
        case $b in
          1|8) shape="-k 3 --model llama3" ;;
          64|256) shape="-k $([ $b = 64 ] && echo 4 || echo 7) --model qwen3" ;;
          512) shape="-k 7 --model llama3" ;;
        esac
        $K --impl $impls -b $b $shape >> "$out/time.txt" 2>&1; echo "kernels B=$b exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_bench_truncation.py \
        > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for g in ${SHARDS:-5 9}; do
          timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $g/21 \
            ${SHAPE:+--shape $SHAPE} --out "$out/truncation-$tool-$g" > "$out/truncation-$tool-$g.txt" 2>&1 &
        done
      done
      wait; for f in "$out"/truncation-*.txt; do echo "$(basename $f): $(tail -n 1 $f)"; done ;;
    *) echo "usage: run.sh search|time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
