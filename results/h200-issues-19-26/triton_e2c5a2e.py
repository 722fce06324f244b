"""The Triton kernels as they were at e2c5a2e, as an implementation to time beside today's."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specbench_e2c5a2e.verification import prepare_verify

from specbench.implementations.contract import Implementation
from specbench.verification import VerifyResult


def _prepare(kwargs):
    backend_verify, checked = prepare_verify(**kwargs, backend="triton")
    # the old package's VerifyResult is its own class: re-wrapped (on the host, outside any graph's GPU time)
    return lambda: VerifyResult(*backend_verify(**checked))


triton_e2c5a2e = Implementation("triton-e2c5a2e", "the Triton kernels at e2c5a2e", prepare=_prepare,
                                rng="specbench", seeded=True, batch_invariant=True, cuda_graph=True, needs_gpu=True)
