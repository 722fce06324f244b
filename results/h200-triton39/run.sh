#!/usr/bin/env bash
# The split histogram path under Triton 3.9 on the GPU machine. Compiled for sm_90, 3.9 lowers tl.histogram to a
# shared-memory atomic that tokens outside the window skip, and a level's loop is about half of 3.6's
# (results/cpu-triton-versions/); the launcher's choices were timed on 3.6 only.
# Here first: bash results/h200-triton39/pack.sh (eight pieces of 5 MiB under .whl/triton39-pieces/, ignored by git;
# a call carried no more than 5 to 10 MiB beside this working tree). Then calls in a row on one warm machine (30 s
# idle and it is given back), each with one piece copied into .whl/triton39 beside sha256 alone, carry
# [".whl/triton39"], command: mkdir -p /tmp/p && cp .whl/triton39/* /tmp/p (outside the tree, so it stays while
# the machine is held); and last: PIECES=/tmp/p OUT=/tmp/t39 bash results/h200-triton39/run.sh install warm time
# (OUT outside $OUT, so that a later call can go on from it with --resume; copy it to $OUT at the end).
# `breakdown`: tests/gpu_kernel_breakdown.py at B = 256 under 3.9 and under 3.6, draft logits
# and probs (breakdown-3.9.txt, breakdown-3.6.txt).
# `install` joins the pieces, checks their hash and unpacks them to /tmp/site39; `warm` and `time` are
# results/h200-histogram-variants/run.sh's, with /tmp/site39 first on PYTHONPATH (IMPLS: the launcher's own, and 64 or
# 256 parts a level with the last level by atomics or by tl.histogram; the run at b524e12 named the launcher's own of
# then, 64 parts by atomics, `triton`, and the others -noatomic, -bins256, -bins256-noatomic). The pieces hold no
# ptxas: 3.9 assembles sm_90 with the machine's Triton 3.6's ptxas (CUDA 12.8, the one 3.6 uses for sm_90), so that
# only Triton's code generation differs, and it finds its backend in its own tree (its entry points would name the
# AMD backend, left out).
set -uo pipefail
triton36=$(env -u PYTHONPATH python3 -c 'import os, triton; print(os.path.dirname(triton.__file__))')
ptxas36=$triton36/backends/nvidia/bin/ptxas
export SITE=/tmp/site39 TRITON_PTXAS_BLACKWELL_PATH=$ptxas36 TRITON_BACKENDS_IN_TREE=1
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-bins64-atomic,$H-bins64-noatomic,$H-bins256-atomic,$H-bins256-noatomic}
export KNOBS=${KNOBS:---top-p 0.95}
export BATCHES=${BATCHES:-8 64 256 512}
for step in "$@"; do
  case $step in
    install)
      cat ${PIECES:-.whl/triton39}/triton-3.9.0-site.tar.xz.part* > /tmp/site39.tar.xz || exit 1
      want=$(cat ${PIECES:-.whl/triton39}/sha256)
      [ "$(sha256sum /tmp/site39.tar.xz | cut -c1-64)" = "$want" ] || { echo "the pieces' hash differs"; exit 1; }
      rm -rf $SITE && mkdir -p $SITE && tar xJf /tmp/site39.tar.xz -C $SITE || exit 1
      PYTHONPATH=$SITE python3 -c 'import torch, triton; print("torch", torch.__version__, triton.__version__)'
      $ptxas36 --version | tail -n 1 ;;
    breakdown)  # each launch's time at B = 256, top_p 0.95, draft logits and probs, under 3.9 and under 3.6
      for draft in logits probs; do
        PYTHONPATH=$SITE:$PWD timeout ${LIMIT:-150} python3 tests/gpu_kernel_breakdown.py --batch 256 --k 7 \
          --model qwen3 --draft $draft --top-p 0.95 --calls 10 >> "${OUT:?set OUT}/breakdown-3.9.txt" 2>&1
        echo "breakdown 3.9 $draft exit $?"
        env -u SITE -u TRITON_PTXAS_BLACKWELL_PATH -u TRITON_BACKENDS_IN_TREE PYTHONPATH=$PWD timeout ${LIMIT:-150} \
          python3 tests/gpu_kernel_breakdown.py --batch 256 --k 7 --model qwen3 --draft $draft --top-p 0.95 \
          --calls 10 >> "${OUT:?set OUT}/breakdown-3.6.txt" 2>&1
        echo "breakdown 3.6 $draft exit $?"
      done ;;
    *) bash results/h200-histogram-variants/run.sh "$step" ;;
  esac
done
