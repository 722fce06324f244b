#!/usr/bin/env bash
# What made this folder, on the GPU machine from the repository root with OUT set and .old/head carried
# (before.py's docstring says what it holds):
#   bash results/h200-pass-prefetch/run.sh passes  # passes/bench_pass.py: the group maxima pass alone, one program per
#                                                  # row, in the variants of passes/passes.py
#   bash results/h200-pass-prefetch/run.sh time    # top_k 50 + top_p 0.9 on issue 20's shapes (graph), the working
#                                                  # tree's kernels beside 9fc6ac3's (before.py), draft logits and probs,
#                                                  # and at B = 256 / 512 the fused step's other shape; IMPLS, BATCHES
#   bash results/h200-pass-prefetch/run.sh check   # the truncation GPU tests
#   bash results/h200-pass-prefetch/run.sh sanitize  # the truncation kernels under memcheck, initcheck and racecheck:
#                                                  # groups SHARDS of tests/sanitize_kernels.py --part truncation (21),
#                                                  # one process per group and tool, LIMIT seconds each
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git log -1 --format='commit %H'; date -u; } > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    passes)
      timeout ${LIMIT:-170} python3 results/h200-pass-prefetch/passes/bench_pass.py > "$out/bench_pass.txt" 2>&1
      echo "bench exit $?" ;;
    time)
      K="$S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --target logits -l 3 --top-k 50
         --top-p 0.9 --draft logits,probs -o $out/time --resume"
      impls=${IMPLS:-triton,results/h200-pass-prefetch/before.py:triton_before}
      for b in ${BATCHES:-1 8 64 256 512}; do
        case $b in
          1|8) shape="-k 3 --model llama3"; extra= ;;
          64) shape="-k 4 --model qwen3"; extra= ;;
          256) shape="-k 7 --model qwen3"; extra=,triton-sequential-2048x8 ;;
          512) shape="-k 7 --model llama3"; extra=,triton-sequential-2048x4 ;;
        esac
        $K --impl $impls$extra -b $b $shape >> "$out/time.txt" 2>&1; echo "kernels B=$b exit $?"
      done ;;
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py \
        tests/test_exactness_truncation.py tests/test_truncation.py tests/test_bench_truncation.py \
        > "$out/tests.txt" 2>&1
      echo "tests exit $?"; tail -n 1 "$out/tests.txt" ;;
    sanitize)
      for tool in memcheck initcheck racecheck; do
        for g in ${SHARDS:-1 2 3}; do
          timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part truncation --tools $tool --shard $g/21 \
            --out "$out/truncation-$tool-$g" > "$out/truncation-$tool-$g.txt" 2>&1 &
        done
      done
      wait; for f in "$out"/truncation-*.txt; do echo "$(basename $f): $(tail -n 1 $f)"; done ;;
    *) echo "usage: run.sh passes|time|check|sanitize ..." >&2; exit 2 ;;
  esac
done
