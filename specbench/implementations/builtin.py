"""specbench's own implementations: the torch reference, the Triton kernels, and forced launch variants."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any

import torch

from specbench.implementations.contract import Implementation
from specbench.verification import VerifyResult, prepare_verify


def _backend(backend: str) -> Callable[[dict[str, Any]], Callable[[], VerifyResult]]:
    def prepare(kwargs: dict[str, Any]) -> Callable[[], VerifyResult]:
        # the public entry point's checks run once here; the step itself is the backend's call
        backend_verify, checked = prepare_verify(**kwargs, backend=backend)
        return lambda: backend_verify(**checked)

    return prepare


def _triton_unavailable(device: torch.device) -> str | None:
    return "Triton is not installed" if importlib.util.find_spec("triton") is None else None


def _triton_variant(strategy: str, block: int | None = None, num_warps: int | None = None):
    """``prepare`` of a Triton launch variant: the strategy and launch shape are forced inside each
    call only (a context around the call), so variants timed in one process never leak into each other."""

    def prepare(kwargs: dict[str, Any]) -> Callable[[], VerifyResult]:
        from specbench.kernels import launch

        call = _backend("triton")(kwargs)

        def run() -> VerifyResult:
            saved = dict(launch.TUNING)
            launch.TUNING.update(block=block, num_warps=num_warps)
            try:
                with launch.strategy(strategy):
                    return call()
            finally:
                launch.TUNING.update(saved)

        return run

    return prepare


def _ours(name: str, description: str, prepare, **facts) -> Implementation:
    return Implementation(name, description, prepare=prepare, rng="specbench", seeded=True, batch_invariant=True,
                          **facts)


def _triton(name: str, description: str, prepare) -> Implementation:
    return _ours(name, description, prepare, cuda_graph=True, needs_gpu=True, unavailable=_triton_unavailable)


BUILT_IN: dict[str, Implementation] = {
    "torch": _ours("torch", "specbench.reference: vectorized torch, the baseline", _backend("torch"),
                   cuda_graph=True),
    "triton": _triton("triton", "specbench.kernels: Triton kernels", _backend("triton")),
    "triton-sequential": _triton("triton-sequential", "Triton, one program per request forced",
                                 _triton_variant("sequential")),
    "triton-split": _triton("triton-split", "Triton, the vocabulary-split kernels forced", _triton_variant("split")),
    "triton-sequential-w16": _triton("triton-sequential-w16", "Triton, one program per request, 8192 tokens x 16 "
                                     "warps", _triton_variant("sequential", 8192, 16)),
}
