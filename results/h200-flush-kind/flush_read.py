"""`specbench kernels` with the L2 flush reading its window (tests/gpu_timer_check.py's read_flush) instead of
overwriting it (run.sh runs it from the repository root)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd() / "tests"))

from gpu_timer_check import read_flush  # tests/ is not a package

from specbench import timing

timing._evict = read_flush

from specbench.cli import run  # after the patch

sys.exit(run(sys.argv[1:]))
