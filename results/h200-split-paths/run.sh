#!/usr/bin/env bash
# What is to make this folder, on the GPU machine from the repository root with OUT set (one call each):
#   bash results/h200-split-paths/run.sh check    # GPU tests of the tree and block kernels beside the tree, block
#                                                 # (one program and split paths) and truncation kernels under the
#                                                 # three sanitizers (15 processes at once, LIMIT seconds each)
#   bash results/h200-split-paths/run.sh time     # the split paths timed beside one program per request and the
#                                                 # token rule: trees (tests/gpu_tree_timing.py and kernels --tree),
#                                                 # block (kernels --method token,block on the issue's shapes)
#   bash results/h200-split-paths/run.sh recheck  # block under racecheck after its fix, and the truncation shard that
#                                                 # the check call's limit cut off
#   bash results/h200-split-paths/run.sh block    # block timed again after 6e665dd, then under the three sanitizers
#   bash results/h200-split-paths/run.sh trees    # the tree split path with the first rejections' masses split:
#                                                 # timed, then GPU tests beside the three sanitizers
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 PATH=$PATH:/usr/local/cuda/bin
out=${OUT:?set OUT to the folder for the results}
S="python3 -m specbench --format plain"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
  python3 -c 'import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)'
  date -u; } > "$out/machine.txt" 2>&1
case ${1:-} in
  check)
    timeout 300 python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py tests/test_methods.py \
      > "$out/pytest.txt" 2>&1 &
    for tool in memcheck initcheck racecheck; do
      for job in trees:1/2 trees:2/2 block:1/1 truncation:1/2 truncation:2/2; do
        part=${job%%:*} shard=${job#*:} name=sanitize-${job%%:*}-${job#*:}-$tool; name=${name/\//of}
        timeout ${LIMIT:-500} python3 tests/sanitize_kernels.py --part $part --tools $tool --shard $shard \
          --out "$out/$name" > "$out/$name.txt" 2>&1 &
      done
    done
    wait; tail -n 2 "$out/pytest.txt"; tail -n 1 "$out"/sanitize-*.txt ;;
  time)
    timeout 150 python3 tests/gpu_tree_timing.py --out "$out/tree-timing.json" > "$out/tree-timing.txt" 2>&1
    echo "tree timing exit $?"
    K="$S kernels --no-charts --impl triton,triton-split --mode probabilistic"
    $K --tree 2x2,chain:4 -b 1,8,64,256 --model llama3 -l 2,full --draft logits,probs -o "$out/kernels-trees" \
      > "$out/kernels-trees.txt" 2>&1; echo "kernels --tree exit $?"
    B="$K --method token,block --draft logits,probs --target logits,probs -o $out/kernels-block --resume"
    { $B -b 64 -k 4 --model qwen3 -l 3,full; $B -b 256 -k 7 --model qwen3 -l 3,full
      $B -b 512 -k 7 --model llama3 -l 3,full; } > "$out/kernels-block.txt" 2>&1
    echo "kernels --method block exit $?" ;;
  recheck)  # after the fix of the racecheck report on the block rows kernel (see README): block under racecheck, and
            # the truncation shard that the check call's time limit cut off
    for job in block:1/1:racecheck truncation:1/2:memcheck truncation:1/2:initcheck truncation:1/2:racecheck; do
      IFS=: read -r part shard tool <<< "$job"; name=recheck-$part-${shard/\//of}-$tool
      timeout ${LIMIT:-500} python3 tests/sanitize_kernels.py --part $part --tools $tool --shard $shard \
        --out "$out/$name" > "$out/$name.txt" 2>&1 &
    done
    wait; tail -n 1 "$out"/recheck-*.txt ;;
  block)  # block after it stopped reading rows it never uses (6e665dd): timed again, then the three sanitizers
    K="$S kernels --no-charts --impl triton,triton-split --mode probabilistic"
    B="$K --method token,block --draft logits,probs --target logits,probs -o $out/kernels-block-2 --resume"
    { $B -b 64 -k 4 --model qwen3 -l 3,full; $B -b 256 -k 7 --model qwen3 -l 3,full
      $B -b 512 -k 7 --model llama3 -l 3,full; } > "$out/kernels-block-2.txt" 2>&1
    echo "kernels --method block exit $?"
    for tool in memcheck initcheck racecheck; do
      timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part block --tools $tool --shard 1/1 \
        --out "$out/block-$tool" > "$out/block-$tool.txt" 2>&1 &
    done
    wait; tail -n 1 "$out"/block-*.txt ;;
  trees)  # the tree split path after the first rejections' masses moved across programs: timed, then tested on
          # the GPU beside the three sanitizers (two shards each, LIMIT seconds)
    timeout 150 python3 tests/gpu_tree_timing.py --out "$out/tree-timing-2.json" > "$out/tree-timing-2.txt" 2>&1
    echo "tree timing exit $?"
    timeout ${LIMIT:-300} python3 -m pytest -q -p no:cacheprovider tests/test_trees_triton.py > "$out/pytest-trees.txt" 2>&1 &
    for tool in memcheck initcheck racecheck; do for shard in 1 2; do
      timeout ${LIMIT:-300} python3 tests/sanitize_kernels.py --part trees --tools $tool --shard $shard/2 \
        --out "$out/trees-$tool-$shard" > "$out/trees-$tool-$shard.txt" 2>&1 &
    done; done
    wait; tail -n 2 "$out/pytest-trees.txt"; tail -n 1 "$out"/trees-*.txt ;;
  *) echo "usage: run.sh check|time|recheck|block|trees" >&2; exit 2 ;;
esac
