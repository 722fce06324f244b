#!/usr/bin/env bash
# Triton 3.9 for the GPU machine (which has 3.6), in pieces a device call can carry (64 MiB a call with the working
# tree): its wheel for Python 3.12 unpacked without what an H200 does not use (the AMD backend, the Blackwell ptxas,
# CUPTI), as one tar.xz cut in two. Run here, from the repository root (`.whl/` is ignored: .git/info/exclude):
#   bash results/h200-triton39/pack.sh
set -euo pipefail
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$work" triton==3.9.0
mkdir "$work/site"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$work"/triton-3.9.0-*.whl \
  "$work/site"
rm -rf "$work"/site/triton/backends/amd "$work"/site/triton/backends/nvidia/lib/cupti \
  "$work"/site/triton/backends/nvidia/lib/cupti-blackwell "$work"/site/triton/backends/nvidia/bin/ptxas-blackwell
tar cf - -C "$work/site" . | xz -6 -T2 > "$work/site.tar.xz"
mkdir -p .whl/triton39
rm -f .whl/triton39/*
split -b 53M -d "$work/site.tar.xz" .whl/triton39/triton-3.9.0-site.tar.xz.part
sha256sum "$work/site.tar.xz" | cut -c1-64 > .whl/triton39/sha256
rm -rf "$work"
ls -l .whl/triton39
