#!/usr/bin/env bash
# The split histogram path under Triton 3.9 on the GPU machine (planned; not run yet). Compiled for sm_90, 3.9 lowers
# tl.histogram to a shared-memory atomic that tokens outside the window skip, and a level's loop is about half of
# 3.6's (results/cpu-triton-versions/); the launcher's choices were timed on 3.6 only.
# Here first: bash results/h200-triton39/pack.sh (two pieces under .whl/triton39/). Then two calls in a row on one
# warm machine (a piece carried once stays there while the machine is held):
#   1. carry [".whl/triton39/triton-3.9.0-site.tar.xz.part00"], command: ls -l .whl/triton39
#   2. carry [".whl/triton39/triton-3.9.0-site.tar.xz.part01", ".whl/triton39/sha256"],
#      command: bash results/h200-triton39/run.sh install warm time
# `install` joins the pieces, checks their hash and unpacks them to /tmp/site39; `warm` and `time` are
# results/h200-histogram-variants/run.sh's, with /tmp/site39 first on PYTHONPATH (IMPLS: the launcher's own, the
# last level by tl.histogram, 256 parts in two levels).
set -uo pipefail
export SITE=/tmp/site39
H=triton-histogram-4096x1024x4
export IMPLS=${IMPLS:-triton,$H-noatomic,$H-bins256,$H-bins256-noatomic} KNOBS=${KNOBS:---top-p 0.95}
export BATCHES=${BATCHES:-8 64 256 512}
for step in "$@"; do
  case $step in
    install)
      cat .whl/triton39/triton-3.9.0-site.tar.xz.part* > /tmp/site39.tar.xz || exit 1
      want=$(cat .whl/triton39/sha256)
      [ "$(sha256sum /tmp/site39.tar.xz | cut -c1-64)" = "$want" ] || { echo "the pieces' hash differs"; exit 1; }
      rm -rf $SITE && mkdir -p $SITE && tar xJf /tmp/site39.tar.xz -C $SITE || exit 1
      PYTHONPATH=$SITE python3 -c 'import torch, triton; print("torch", torch.__version__, triton.__version__)' ;;
    *) bash results/h200-histogram-variants/run.sh "$step" ;;
  esac
done
