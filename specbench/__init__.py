"""specbench: benchmarks and acceptance simulation for the verification step of speculative decoding.

``verify``, ``SamplingParams``, ``VerifyResult`` and ``simulate_acceptance`` load torch on first use, so that the
command line's ``--help`` and light modules (acceptance math, scenarios) start without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specbench.errors import SpecbenchError

__version__ = "0.1.0"
__all__ = ["SamplingParams", "SpecbenchError", "VerifyResult", "__version__", "simulate_acceptance", "verify"]

if TYPE_CHECKING:
    from specbench.verification import SamplingParams, VerifyResult, simulate_acceptance, verify

_FROM_VERIFICATION = ("SamplingParams", "VerifyResult", "simulate_acceptance", "verify")


def __getattr__(name: str) -> Any:
    if name in _FROM_VERIFICATION:
        from specbench import verification

        return getattr(verification, name)
    raise AttributeError(f"module 'specbench' has no attribute {name!r}")
