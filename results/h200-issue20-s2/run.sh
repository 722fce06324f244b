#!/usr/bin/env bash
# What made this folder, run on the GPU machine from the repository root with OUT set:
#   bash results/h200-issue20-s2/run.sh check      # the GPU test files, then per-kernel times (profile_kernels.py)
#   bash results/h200-issue20-s2/run.sh time       # the issue's speed-goal cases: untruncated, and top_k 50 + top_p 0.9
#                                                  # beside the previous truncation kernels (triton-v2, 91910c9)
#   bash results/h200-issue20-s2/run.sh sanitize   # the truncation and logprobs kernels under compute-sanitizer
#   bash results/h200-issue20-s2/run.sh final      # the session's last call (tests, timings, timer check, sanitizers)
# .old/ (not committed) holds `git archive 91910c9 specbench` renamed to the package specbench_v2, loaded by
# .old/triton_v2.py.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
case ${1:-} in
  final)  # this session's last call: GPU tests, the committed timings, the timer check, the sanitizers (time-boxed)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'; } \
      > "$out/machine.txt" 2>&1
    python3 -m pytest -q -p no:cacheprovider tests/test_timing.py tests/test_truncation.py tests/test_methods.py \
      tests/test_launch.py > "$out/gpu-pytest.txt" 2>&1; echo "pytest exit $?"; tail -2 "$out/gpu-pytest.txt"
    K="python3 -m specbench --format plain kernels --no-charts --max-ms 40 --mode probabilistic --impl triton
       --draft logits,probs --target logits,probs --cuda-graph -l 3 --top-k 50 --top-p 0.9 -o $out/timing --resume"
    { $K -b 1,8 -k 3 --model llama3; $K -b 64 -k 4 --model qwen3; $K -b 256 -k 7 --model qwen3
      $K -b 512 -k 7 --model llama3; } > "$out/timing-console.txt" 2>&1; echo "kernels exit $?"
    timeout 90 python3 tests/gpu_timer_check.py > "$out/gpu-timer-check.txt" 2>&1; echo "timer check exit $?"
    for tool in memcheck initcheck racecheck; do
      timeout 150 python3 tests/sanitize_kernels.py --part truncation --tools $tool --out "$out/sanitize-$tool" \
        > "$out/sanitize-$tool.txt" 2>&1 &
    done
    wait; tail -n 4 "$out"/sanitize-*.txt ;;
  check)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
      git rev-parse HEAD 2>/dev/null; } > "$out/machine.txt" 2>&1
    python3 -m pytest -q -p no:cacheprovider tests/test_truncation.py tests/test_bench_truncation.py \
      tests/test_launch.py tests/test_exactness_truncation.py tests/test_verify_api.py > "$out/gpu-pytest.txt" 2>&1
    echo "pytest exit $?"; tail -3 "$out/gpu-pytest.txt"
    python3 results/h200-issue20-s2/profile_kernels.py > "$out/profile.txt" 2>&1; echo "profile exit $?" ;;
  time)
    K="python3 -m specbench --format plain kernels --no-charts --max-ms 40 --mode probabilistic
       --draft logits,probs --target logits,probs --cuda-graph -l 3 -o $out/timing"
    { for knobs in "" "--top-k 50 --top-p 0.9"; do
        small=triton,.old/triton_v2.py:triton_v2; [ -z "$knobs" ] && small=triton
        $K --impl $small $knobs -b 1,8 -k 3 --model llama3 --resume
        $K --impl $small $knobs -b 64 -k 4 --model qwen3 --resume
        $K --impl triton $knobs -b 256 -k 7 --model qwen3 --resume
        $K --impl triton $knobs -b 512 -k 7 --model llama3 --resume
      done; } > "$out/timing-console.txt" 2>&1
    echo "kernels exit $?"; tail -5 "$out/timing-console.txt" ;;
  sanitize)
    for tool in memcheck initcheck racecheck; do
      python3 tests/sanitize_kernels.py --part truncation --tools $tool --out "$out/sanitize-$tool" \
        > "$out/sanitize-$tool.txt" 2>&1 &
    done
    wait; cat "$out"/sanitize-*.txt ;;
  *) echo "usage: run.sh check|time|sanitize|final" >&2; exit 2 ;;
esac
