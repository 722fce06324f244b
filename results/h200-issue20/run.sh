#!/usr/bin/env bash
# What made this folder, run on the GPU machine from the repository root with OUT set:
#   bash results/h200-issue20/run.sh check      # the GPU test files
#   bash results/h200-issue20/run.sh sanitize   # the truncation and logprobs kernels under compute-sanitizer
#                                               # (memcheck, initcheck, racecheck side by side)
#   bash results/h200-issue20/run.sh time       # the speed-goal cases: untruncated (beside 93f131b's
#                                               # kernels), top_k 50 + top_p 0.9 and top_p 0.95 (beside the first
#                                               # truncation prepass, triton-v1, and FlashInfer's renormalisation + chain sampler)
# .old/ (not committed) holds `git archive 93f131b specbench` and `git archive a295127 specbench` renamed to the
# packages specbench_93f131b and specbench_v1, loaded by .old/triton_93f131b.py and .old/triton_v1.py.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
case ${1:-} in
  check)
    { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
      compute-sanitizer --version | tail -1; } > "$out/machine.txt" 2>&1
    python3 -m pytest -q -p no:cacheprovider tests/test_truncation_kernels.py tests/test_truncation.py \
      tests/test_bench_truncation.py tests/test_launch.py tests/test_probabilistic.py tests/test_target_probs.py \
      tests/test_greedy.py tests/test_synthetic.py tests/test_spread.py tests/test_verify_api.py \
      tests/test_exactness.py tests/test_exactness_truncation.py > "$out/gpu-pytest.txt" 2>&1
    echo "pytest exit $?"; tail -3 "$out/gpu-pytest.txt" ;;
  sanitize)
    for tool in memcheck initcheck racecheck; do
      python3 tests/sanitize_kernels.py --part truncation --tools $tool --out "$out/sanitize-$tool" \
        > "$out/sanitize-$tool.txt" 2>&1 &
    done
    wait; cat "$out"/sanitize-*.txt ;;
  time)
    # FlashInfer 0.6.7.post3 (flashinfer-python, apache-tvm-ffi 0.1.15.post2) travels as wheels in .whl/
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=$PWD:/tmp/site
    K="python3 -m specbench --format plain kernels --no-charts --max-ms 40 --mode probabilistic
       --draft logits,probs --target logits,probs --cuda-graph -l 3 -o $out/timing"
    { for knobs in "" "--top-k 50 --top-p 0.9" "--top-p 0.95"; do
        small=triton,.old/triton_v1.py:triton_v1,flashinfer-truncated; large=triton,flashinfer-truncated
        [ -z "$knobs" ] && small=triton,.old/triton_93f131b.py:triton_93f131b && large=$small
        $K --impl $small $knobs -b 1,8 -k 3 --model llama3 --resume
        $K --impl $small $knobs -b 64 -k 4 --model qwen3 --resume
        $K --impl $large $knobs -b 256 -k 7 --model qwen3 --resume
        $K --impl $large $knobs -b 512 -k 7 --model llama3 --resume
      done; } > "$out/timing-console.txt" 2>&1
    echo "kernels exit $?"; tail -5 "$out/timing-console.txt" ;;
  *) echo "usage: run.sh check|sanitize|time" >&2; exit 2 ;;
esac
