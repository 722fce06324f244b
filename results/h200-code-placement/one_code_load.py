"""`specbench kernels` with every placement running the one load of each kernel's code its process made, as
before each placement got its own (run.sh runs it from the repository root)."""
import sys

from specbench.kernels import launch

launch._Launcher._placed = lambda self, key, compiled: compiled

from specbench.cli import run  # after the patch

sys.exit(run(sys.argv[1:]))
