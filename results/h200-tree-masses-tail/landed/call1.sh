# stop 65, call 1: the GPU tree tests and the tree workload on main (81b9cb7's wait) and on main + masses-tail-next.patch
# at once, then the sanitizers on the patched copy if its tests passed (on main otherwise)
# (as it ran: from the repository root of main at 925035f, carried as .old/s65-call1.sh)
set -uo pipefail
source results/gpu-lib.sh
out=$OUT/r; mkdir -p $out/main $out/tail
write_machine $out/machine.txt
rm -rf /tmp/p && cp -a . /tmp/p && (cd /tmp/p && git apply results/h200-tree-masses-tail/masses-tail-next.patch && git diff --stat) > $out/tail/apply.txt 2>&1
check() {
  local d=$1 o=$2 s
  cd $d; export PYTHONPATH=$d
  for s in 1 2; do timeout ${CHECK:-220} python3 tests/sanitize_kernels.py --part trees --workload --shard $s/2 > $o/work-$s.txt 2>&1 & done
  timeout ${CHECK:-220} python3 -m pytest -q -p no:cacheprovider -n 4 tests/test_trees_triton.py > $o/pytest.txt 2>&1 &
  wait
}
(check $PWD $out/main) & (check /tmp/p $out/tail) & wait
echo "checks at ${SECONDS}s"
for v in main tail; do echo "== $v"; tail -n 1 $out/$v/work-*.txt; tail -n 2 $out/$v/pytest.txt; done
target=$PWD; name=main
if grep -q " passed" $out/tail/pytest.txt && ! grep -q "failed\|error" $out/tail/pytest.txt; then target=/tmp/p; name=tail; fi
left=$(( ${BUDGET:-580} - SECONDS ))
echo "sanitize $name, $left s"
(cd $target && export PYTHONPATH=$target && sanitize_shards trees "1/3 2/3 3/3" $left $out/$name/sanitize)
echo "done at ${SECONDS}s"
tar czf $OUT/r.tgz -C $OUT r && rm -rf $out
