"""specbench: benchmarks and acceptance simulation for the verification step of speculative decoding."""

__version__ = "0.1.0"

from specbench.errors import SpecbenchError  # noqa: E402
from specbench.verify import VerifyResult, simulate_acceptance, verify  # noqa: E402

__all__ = ["SpecbenchError", "VerifyResult", "simulate_acceptance", "verify", "__version__"]
