#!/usr/bin/env bash
# Triton 3.9 for the GPU machine (which has 3.6), in pieces a device call can carry: its wheel for Python 3.12
# unpacked without what sm_90 work there does not need (the AMD backend, CUPTI, the profiler and plugin libraries, its
# ptxas and nvdisasm: run.sh points it at the machine's Triton 3.6's ptxas), its library stripped of debug
# information (500 -> 192 MB), as one tar.xz (41.6 MB) cut into pieces of 5 MiB (a call carried 10 MiB
# beside this working tree on 2026-11-29 and refused it on 11-30; 5 MiB went). Run here, from the repository root (`.whl/` is ignored):
#   bash results/h200-triton39/pack.sh
# The pieces land in .whl/triton39-pieces/ and the hash in .whl/triton39/sha256; a call carries .whl/triton39 with
# one piece copied in beside the hash (run.sh says how).
set -euo pipefail
work=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 -d "$work" triton==3.9.0
mkdir "$work/site"
python3 -c "import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])" "$work"/triton-3.9.0-*.whl \
  "$work/site"
t="$work/site/triton"
rm -rf "$t"/backends/amd "$t"/backends/nvidia/lib/cupti* "$t"/backends/nvidia/bin/ptxas* \
  "$t"/backends/nvidia/bin/nvdisasm "$t"/_C/libproton.so "$t"/plugins "$t"/instrumentation
strip --strip-unneeded "$t"/_C/libtriton.so
tar cf - -C "$work/site" . | xz -6 -T2 > "$work/site.tar.xz"
mkdir -p .whl/triton39 .whl/triton39-pieces
rm -f .whl/triton39/* .whl/triton39-pieces/*
split -b 5M -d "$work/site.tar.xz" .whl/triton39-pieces/triton-3.9.0-site.tar.xz.part
sha256sum "$work/site.tar.xz" | cut -c1-64 > .whl/triton39/sha256
rm -rf "$work"
ls -l .whl/triton39 .whl/triton39-pieces
