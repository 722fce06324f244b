"""A planted slowdown for trying the perf gate: specbench's torch backend, 1.5x as slow, on a CPU.

Each call runs the torch step, then keeps its core busy for half as long again, so every sample
takes 1.5x its own work whatever the case. It is named ``torch`` so that its rows match a plain
run's torch rows in ``specbench compare`` (the comparison warns that the two came from different
places):

    specbench kernels --quick -o runs/before
    specbench kernels --quick --impl examples/slower_torch.py:slower_torch -o runs/after
    specbench compare runs/before runs/after      # exit 1: the rows are slower, about 1.5x

Set ``SLOWDOWN`` for another factor. CPU only: torch's CPU calls finish before they return,
which is what lets the wait follow the work.
"""

import time
from dataclasses import replace

from specbench.implementations.builtin import BUILT_IN

SLOWDOWN = 1.5


def _prepare(kwargs):
    step = BUILT_IN["torch"].prepare(kwargs)

    def slower_step():
        start = time.perf_counter_ns()
        result = step()
        until = start + SLOWDOWN * (time.perf_counter_ns() - start)
        while time.perf_counter_ns() < until:  # busy, not asleep: the core stays taken, as real work would take it
            pass
        return result

    return slower_step


slower_torch = replace(BUILT_IN["torch"], description=f"specbench's torch backend, {SLOWDOWN}x as slow (planted)",
                       prepare=_prepare, devices=("cpu",), source="examples/slower_torch.py:slower_torch")
