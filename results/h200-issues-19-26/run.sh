#!/usr/bin/env bash
# What made this folder, run on the GPU machine from the repository root with OUT set:
#   bash results/h200-issues-19-26/run.sh check   # GPU tests, then the kernels under compute-sanitizer
#   bash results/h200-issues-19-26/run.sh time    # every issue-9 case, today's kernels beside e2c5a2e's
# The e2c5a2e kernels come from .old/ (not committed): `git archive e2c5a2e specbench` renamed to the
# package specbench_e2c5a2e, loaded by .old/triton_e2c5a2e.py as the implementation triton-e2c5a2e.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
case ${1:-} in
  check)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
      compute-sanitizer --version | tail -1; } > "$out/machine.txt" 2>&1
    python3 -m pytest -q -p no:cacheprovider tests/test_launch.py tests/test_greedy.py tests/test_probabilistic.py \
      tests/test_synthetic.py tests/test_target_probs.py tests/test_verify_api.py tests/test_rng.py tests/test_races.py \
      tests/test_bench.py tests/test_exactness.py tests/test_timing.py tests/test_implementations.py \
      > "$out/gpu-pytest.txt" 2>&1
    echo "pytest exit $?"; tail -3 "$out/gpu-pytest.txt"
    python3 tests/sanitize_kernels.py --out "$out/sanitize"
    echo "sanitize exit $?" ;;
  time)
    K="python3 -m specbench --format plain kernels --no-charts --max-ms 100 --mode greedy,probabilistic
       --draft logits,probs,none --target logits,probs --cuda-graph -o $out/timing
       --impl triton,.old/triton_e2c5a2e.py:triton_e2c5a2e"
    { $K -b 1,8 -k 3 --model llama3 -l 3
      $K -b 64 -k 4 --model qwen3 -l 3,full --resume
      $K -b 256 -k 7 --model qwen3 -l 3,full --resume
      $K -b 512 -k 7 --model llama3 -l 3,full --resume; } > "$out/timing-console.txt" 2>&1
    echo "kernels exit $?"; tail -5 "$out/timing-console.txt" ;;
  *) echo "usage: run.sh check|time" >&2; exit 2 ;;
esac
