"""The fused truncated step at 8 warps with its registers capped at 128 a thread (Triton's ``maxnreg``), so that two
of its programs share a multiprocessor as the 4-warp ones do, to time beside the launcher's own shapes in one
process.

``triton_w8r128`` is specbench's Triton backend with two changes for the length of a call: every kernel is launched
at 2048 tokens a chunk and 8 warps (``launch.TUNING``, as a ``triton-sequential-2048x8`` variant sets it), and the
truncated step through Triton's JIT with ``maxnreg=128``. ``triton_w8`` is the same shape without the cap (ptxas
gives it 192 to 208 registers: one program a multiprocessor). Every other call is the working tree's code.
"""

from __future__ import annotations

from dataclasses import replace

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch


class _Capped(launch._Launcher):
    """A launcher through Triton's JIT with a register cap (graph timing leaves the JIT's host time out)."""

    def __init__(self, kernel, registers: int | None) -> None:
        super().__init__(kernel)
        self.registers = registers

    def __call__(self, grid, args, num_warps, stream, max_registers=None, **constexprs) -> None:
        # (the launcher's own cap, which it passes since this was timed, gives way to this one)
        options = {"maxnreg": self.registers} if self.registers else {}
        self.kernel[grid](*args, num_warps=num_warps, **options, **constexprs)


def _backend(name: str, registers: int | None, description: str):
    truncated = _Capped(launch._TRUNCATED.kernel, registers)

    def prepare(kwargs):
        step = BUILT_IN["triton"].prepare(kwargs)

        def capped_step():
            today, shape = launch._TRUNCATED, (launch.TUNING["block"], launch.TUNING["num_warps"])
            launch._TRUNCATED = truncated
            launch.TUNING.update(block=2048, num_warps=8)
            try:
                return step()
            finally:
                launch._TRUNCATED = today
                launch.TUNING.update(block=shape[0], num_warps=shape[1])

        return capped_step

    return replace(BUILT_IN["triton"], name=f"triton-{name}", description=description, prepare=prepare,
                   source=f"results/h200-register-cap/before.py:triton_{name}")


triton_w8r128 = _backend("w8r128", 128, "Triton, the truncated step at 2048 x 8 with at most 128 registers a thread")
triton_w8 = _backend("w8", None, "Triton, the truncated step at 2048 x 8")
