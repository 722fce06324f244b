"""`specbench kernels` with N placements and N flush windows instead of ten: python3 placements.py N ARGS...
(run.sh runs it from the repository root)."""
import sys

from specbench import bench, timing

count = int(sys.argv.pop(1))
bench.PLACEMENTS = timing.FLUSH_WINDOWS = count

from specbench.cli import run  # after the patch

sys.exit(run(sys.argv[1:]))
