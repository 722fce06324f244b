#!/usr/bin/env bash
# Draft probabilities read as target probabilities are (NaN and negative -> 0, above 1 -> 1) in every kernel: the
# new tests on a GPU, and the chain steps from draft probabilities timed as results/h200-issue9-session5/ timed them
# (CUDA graph), to compare with that file (`specbench compare`). From the repository root with OUT set:
#   bash results/h200-draft-prob-cleaning/run.sh check time
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
out=${OUT:?set OUT to the folder for the results}
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  git rev-parse HEAD 2>/dev/null; date -u; } > "$out/machine.txt" 2>&1
K="python3 -m specbench --format plain kernels --no-charts --max-ms 60 --mode probabilistic --draft probs \
   --target logits,probs --cuda-graph --impl triton -o $out/draft-probs"
for step in "$@"; do
  case $step in
    check)
      timeout ${LIMIT:-240} python3 -m pytest -q -p no:cacheprovider tests/test_probabilistic.py tests/test_target_probs.py \
        tests/test_trees_triton.py -k "hostile or agree or nan_and_inf or documented or law" > "$out/pytest.txt" 2>&1
      tail -n 2 "$out/pytest.txt" ;;
    time)
      { $K -b 1,8 -k 3 --model llama3 -l 3
        $K -b 64 -k 4 --model qwen3 -l 3,full --resume
        $K -b 256 -k 7 --model qwen3 -l 3,full --resume; } > "$out/time.txt" 2>&1
      echo "time exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out/time.txt" | head ;;
    *) echo "usage: run.sh check|time ..." >&2; exit 2 ;;
  esac
done
