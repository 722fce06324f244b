"""Kernel variants at HEAD (v1) and two with one change left out each (v1a: no draft-count gating by the
temperature; v1b: the inline terminal race without its DONE kind), timed beside e2c5a2e's."""
import importlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from specbench.implementations.contract import Implementation
from specbench.verification import VerifyResult


def _variant(package):
    prepare_verify = importlib.import_module(f"{package}.verification").prepare_verify

    def prepare(kwargs):
        backend_verify, checked = prepare_verify(**kwargs, backend="triton")
        return lambda: VerifyResult(*backend_verify(**checked))

    return Implementation(f"triton-{package.removeprefix('specbench_')}", f"Triton kernels of {package}",
                          prepare=prepare, rng="specbench", seeded=True, batch_invariant=True, cuda_graph=True,
                          needs_gpu=True)


final, v3a, v3b = (_variant(f"specbench_{name}") for name in ("final", "v3a", "v3b"))
