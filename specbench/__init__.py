"""specbench: benchmarks and acceptance simulation for the verification step of speculative decoding."""

__version__ = "0.1.0"

from specbench.errors import SpecbenchError
from specbench.verification import VerifyResult, simulate_acceptance, verify

__all__ = ["SpecbenchError", "VerifyResult", "__version__", "simulate_acceptance", "verify"]
