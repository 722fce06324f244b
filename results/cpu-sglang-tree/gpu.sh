#!/usr/bin/env bash
# The next step (issue 24): SGLang's tree verification timed beside specbench's tree kernels on a GPU, on the GPU
# machine from the repository root with OUT set, SGLANG_DIR a folder holding SGLang 0.5.23's
# sglang/kernels/ops/speculative/spec_tree.py and sglang/kernels/jit/{include,csrc/speculative}, and FlashInfer
# 0.6.7's flashinfer/data/include (the GPU machine has neither: carry them, e.g. SGLANG_DIR=.old/sgl), and WHEELS
# a folder holding apache-tvm-ffi's cp312 wheel (e.g. WHEELS=.old/whl; both folders named in carry):
#   bash results/cpu-sglang-tree/gpu.sh check   # the sglang tests, compare.py for both greedy walkers, and verify
#                                               # --tree 2x2 of the target-only sampler (read from its kernel: its
#                                               # laws with sampled siblings may fail, repeated tokens counted once
#                                               # each; its one-hot laws should pass)
#   bash results/cpu-sglang-tree/gpu.sh time    # the 2x2 tree beside the chain of its depth and chain:6 (the same
#                                               # rows), B = 1, 8, 64, 256, two acceptance levels, graph timer:
#                                               # greedy (both walkers) and probabilistic (the target-only sampler,
#                                               # one-hot drafts: planned inputs with draft rows leave each accepted
#                                               # token's target probability small, which a rule reading no draft
#                                               # row rejects, so its rows would fail the check and go untimed)
# check and time each take a call of their own (each can run for minutes: a call holds 600 s at most).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site \
  "${WHEELS:?set WHEELS to the folder holding the apache-tvm-ffi wheel}"/*.whl || exit 2
export PYTHONPATH=$PWD:${SGLANG_DIR:?set SGLANG_DIR to the folder holding sglang/}:/tmp/site
export PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton, tvm_ffi; print(sys.version.split()[0], torch.__version__, triton.__version__,
    tvm_ffi.__version__)'
  git log -1 --format='commit %H'; sha256sum "$SGLANG_DIR"/sglang/kernels/ops/speculative/spec_tree.py \
    "$SGLANG_DIR"/sglang/kernels/jit/csrc/speculative/{tree,sampling}.cuh \
    "$SGLANG_DIR"/sglang/kernels/jit/include/sgl_kernel/speculative/*.cuh \
    "$SGLANG_DIR"/flashinfer/data/include/flashinfer/sampling.cuh; date -u; } > "$out/machine.txt" 2>&1
for step in "$@"; do
  case $step in
    check)
      timeout ${LIMIT:-200} python3 -m pytest -q -p no:cacheprovider tests/test_implementations.py -k sglang \
        > "$out/tests.txt" 2>&1; echo "tests exit $?"; tail -n 1 "$out/tests.txt"
      for impl in sglang-tree sglang-tree-cuda; do
        IMPL=$impl timeout ${LIMIT:-300} python3 results/cpu-sglang-tree/compare.py > "$out/compare-$impl.txt" 2>&1
        echo "compare $impl exit $?"; tail -n 1 "$out/compare-$impl.txt"
      done
      timeout ${LIMIT:-300} $S verify --impl sglang-tree-target-only -m probabilistic --tree 2x2 -n 4000 \
        --json "$out/verify-target-only.json" > "$out/verify-target-only.txt" 2>&1
      echo "verify target-only exit $? (1 expected)"; tail -n 1 "$out/verify-target-only.txt" ;;
    time)
      timeout ${LIMIT:-500} $S kernels --no-charts --timer graph --max-ms 40 --mode greedy --tree 2x2,chain:6 \
        -b 1,8,64,256 --model llama3 -l 2,full --impl triton,sglang-tree,sglang-tree-cuda -o "$out/greedy-trees" \
        > "$out/greedy-trees.txt" 2>&1; echo "kernels greedy exit $?"
      timeout ${LIMIT:-500} $S kernels --no-charts --timer graph --max-ms 40 --mode probabilistic --tree 2x2,chain:6 \
        -b 1,8,64,256 --model llama3 -l 2,full --draft none --impl triton,sglang-tree-target-only \
        -o "$out/probabilistic-trees" > "$out/probabilistic-trees.txt" 2>&1; echo "kernels probabilistic exit $?" ;;
    *) echo "usage: gpu.sh check|time ..." >&2; exit 2 ;;
  esac
done
