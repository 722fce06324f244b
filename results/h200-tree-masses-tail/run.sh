#!/usr/bin/env bash
# The tree split path's masses tail (README.md; masses-tail-next.patch is on main since the next session, landed/;
# masses-tail.patch, the first form, against 25bff1d) against the kernels before (e554581, before.py), on one GPU machine, from the repository
# root with OUT set and .old/tree_before_tail.py carried (e554581's specbench/kernels/tree.py
# with a local wait_until, split.py's of that commit: `bash results/h200-tree-masses-tail/run.sh before` writes it
# here). Steps, in this order:
#   before:   write .old/tree_before_tail.py and (with the patch applied) .old/tree_racer.py, on the CPU machine
#   time:     `specbench kernels --tree 2x2,chain:6`, Llama 3 rows, B = 1, 2, 4, 8 (the split path), the path accepted
#             and both children of node 0 rejected, one-hot drafts, draft logits and draft probabilities, `triton`
#             beside `triton-before` in one process
#   variants: the kernels' durations (tests/gpu_kernel_breakdown.py) at B = 8 and 1 from draft logits, then
#             `specbench kernels` at B = 1, 4, 8, of `triton`, `triton-before` and variants.py's `triton-racer`
#   timeline: results/h200-tree-timeline/timeline.py with this folder's instrument.py (B = 1, 8)
#   check:    the tree workload of tests/sanitize_kernels.py (two shards, no tool: its kernels compiled) beside the
#             GPU tree tests
#   sanitize: that workload under memcheck, initcheck and racecheck, two shards each, at once
# (TIME_LIMIT, CHECK_LIMIT, LIMIT: seconds for each step's processes.)
set -uo pipefail
here=results/h200-tree-masses-tail
for step in "$@"; do
  case $step in
    before)
      mkdir -p .old
      # (masses-tail-next.patch keeps split.py's wait_until: e554581's file as it is; masses-tail.patch replaces it)
      if grep -q "def wait_until" specbench/kernels/split.py; then git show e554581:specbench/kernels/tree.py > .old/tree_before_tail.py
      else git show e554581:specbench/kernels/tree.py | python3 -c '
import sys
text = sys.stdin.read()
text = text.replace("    take_ticket,\n    wait_until,\n)\n",
                    "    take_ticket,\n)\nfrom specbench.kernels.split import acquire, spin_until\n", 1)
shim = ("\n\n@triton.jit\ndef wait_until(state_ptr, at_least):\n"
        "    # (split.py'"'"'s wait_until of e554581, which this file imports: spin, then acquire)\n"
        "    spin_until(state_ptr, at_least)\n    acquire(state_ptr)\n")
text = text.replace("\n# what is left to emit when a walk stops", shim + "\n# what is left to emit when a walk stops", 1)
sys.stdout.write(text)' > .old/tree_before_tail.py
      fi
      # the racer variant (variants.py; masses-tail.patch only): the patched tree.py, its masses part returning the
      # racer's slice
      grep -q "return ticket" specbench/kernels/tree.py && python3 - <<'PY'
from pathlib import Path
text = Path("specbench/kernels/tree.py").read_text()
for old, new in [
        ("    ticket = take_ticket(counters_ptr + 2 * batch + b, 2 * RACE_SPLITS)\n    if ticket < RACE_SPLITS:\n",
         "    ticket = take_ticket(counters_ptr + 2 * batch + b, 2 * RACE_SPLITS)\n    racer = ticket - RACE_SPLITS\n"
         "    if ticket < RACE_SPLITS:\n        racer = -1\n"),
        ("    return ticket\n", "    return racer\n"),
        ("        if ticket >= RACE_SPLITS:  # RACED", "        if ticket >= 0:  # RACED"),
        ("            job = b * RACE_SPLITS + ticket - RACE_SPLITS\n", "            job = b * RACE_SPLITS + ticket\n")]:
    assert text.count(old) == 1, old
    text = text.replace(old, new)
Path(".old/tree_racer.py").write_text(text)
PY
      echo "wrote .old/tree_before_tail.py (and with masses-tail.patch .old/tree_racer.py)" ;;
    time)
      out=${OUT:?set OUT to the folder for the results}; source results/gpu-lib.sh; write_machine "$out/machine.txt"
      timeout ${TIME_LIMIT:-330} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
        --model llama3 --tree 2x2,chain:6 -b 1,2,4,8 -l 2,full --mode probabilistic --draft none,logits,probs \
        --impl triton,$here/before.py:triton_before -o "$out/tree" > "$out/tree.txt" 2>&1
      echo "tree exit $? at ${SECONDS}s"; grep -h "FAIL\|skipped\|rror" "$out"/tree.txt | cut -c1-200 | head -20 ;;
    variants)
      out=${OUT:?set OUT}; source results/gpu-lib.sh; write_machine "$out/machine.txt"
      for case in "8 full" "8 2" "1 2"; do set -- $case
        for impl in triton $here/before.py:triton_before $here/variants.py:triton_racer; do
          echo "== B=$1 L=$2 $impl"; timeout 120 python3 tests/gpu_kernel_breakdown.py --batch $1 --model llama3 \
            --tree 2x2 --draft logits --acceptance $2 --impl $impl --calls 50 2>&1 | tail -12
        done
      done > "$out/breakdown.txt" 2>&1
      echo "breakdown at ${SECONDS}s"
      timeout ${TIME_LIMIT:-200} python3 -m specbench --format plain kernels --no-charts --timer graph --max-ms 40 \
        --model llama3 --tree 2x2,chain:6 -b 1,4,8 -l 2,full --mode probabilistic --draft logits,probs \
        --impl triton,$here/before.py:triton_before,$here/variants.py:triton_racer -o "$out/variants" \
        > "$out/variants.txt" 2>&1
      echo "variants exit $? at ${SECONDS}s" ;;
    timeline)
      out=${OUT:?set OUT}; source results/gpu-lib.sh
      timeout ${TIMELINE_LIMIT:-150} python3 results/h200-tree-timeline/timeline.py --instrument $here/instrument.py \
        --batches 1,8 --drafts logits,probs --calls 200 > "$out/timeline.txt" 2>&1
      echo "timeline exit $? at ${SECONDS}s" ;;
    check) out=${OUT:?set OUT}; source results/gpu-lib.sh; check_trees "$out" ${CHECK_LIMIT:-330}
      echo "check at ${SECONDS}s" ;;
    sanitize) out=${OUT:?set OUT}; source results/gpu-lib.sh; sanitize_shards trees "1/2 2/2" ${LIMIT:-300} "$out/sanitize" ;;
    *) echo "usage: run.sh before|time|variants|timeline|check|sanitize ..." >&2; exit 2 ;;
  esac
done
