"""Verification methods: the named rules that decide which drafts a step accepts, one registry.

A method is chosen per call (``verify(..., method=...)``); ``token`` is the default and today's rule.
Each method's contract, in the project's notation, is written out in ``specbench/verification.py``'s
module docstring ("Verification methods"). Here live the names, whether a method is exact (its output
follows the target's law) or lossy, one line of description, and the parameters of the lossy rules.

- ``token``: token-by-token rejection sampling (Leviathan et al. 2022, alg. 1). Exact.
- ``block``: block verification (Sun et al. 2024, "Block Verification Accelerates Speculative
  Decoding", arXiv 2403.10444, alg. 2): the draft block is judged as a whole. Exact, and accepts at
  least as many drafts as ``token`` in expectation.
- ``typical``: Medusa's typical acceptance (Cai et al. 2024, arXiv 2401.10774): accept
  a draft iff the target gives it more than ``min(TYPICAL_EPSILON, TYPICAL_DELTA * exp(-H(p)))``. Lossy.
- ``relaxed``: the token rule plus a loose acceptance in the spirit of FLy (Li et al. 2025, arXiv
  2511.22972): an entropy gate and a log-probability margin to the target's top token. Lossy.

Greedy rows (``mode="greedy"``, temperature 0) have one rule whatever the method: the argmax (every
method reduces to it there, or is defined so). The synthetic mode accepts by its profile, so a method
other than ``token`` is refused there: it would time the same step under another name.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from specbench.errors import SpecbenchError

Method = Literal["token", "block", "typical", "relaxed"]

# Medusa's typical acceptance: its published defaults (posterior_threshold, posterior_alpha)
TYPICAL_EPSILON = 0.09
TYPICAL_DELTA = 0.3
# the relaxed rule: a mismatch may stand only where the target's entropy is at least this (nats) ...
RELAXED_MIN_ENTROPY = 1.0
# ... and the draft is within this margin of the target's top token, log p(top) - log p(x) (nats)
RELAXED_MARGIN = 0.3


class MethodInfo(NamedTuple):
    """One verification method: its name, whether its output follows the target's law, what it does, and
    whether a rejected draft can never be the token emitted in its place (the token rule's residual
    ``max(p - q, 0)`` has no mass at a rejected draft; block's residual and typical's own sample can)."""

    name: str
    exact: bool
    description: str
    never_emits_rejected_draft: bool


METHODS: dict[str, MethodInfo] = {info.name: info for info in (
    MethodInfo("token", True, "token-by-token rejection sampling: accept iff u * q(x) < p(x), residual "
               "max(p - q, 0) (Leviathan et al. 2022)", True),
    MethodInfo("block", True, "block verification: weights from the running product of min(1, p / q), the "
               "accepted length chosen over the whole block (Sun et al. 2024, arXiv 2403.10444)", False),
    MethodInfo("typical", False, f"typical acceptance: accept iff p(x) > min({TYPICAL_EPSILON}, "
               f"{TYPICAL_DELTA} * exp(-H(p))), no randomness; a rejected slot samples p (Medusa)", False),
    MethodInfo("relaxed", False, f"the token rule, and also accept where H(p) >= {RELAXED_MIN_ENTROPY} nats "
               f"and log p(top) - log p(x) <= {RELAXED_MARGIN} (in the spirit of FLy)", True),
)}
DEFAULT_METHOD = "token"


def check_method(method: object, mode: str = "probabilistic") -> str:
    """``method`` as a registered name, or a ``SpecbenchError`` naming the choices; a method other than
    ``token`` in the synthetic mode is refused (the profile decides acceptance there)."""
    if not isinstance(method, str) or method not in METHODS:
        raise SpecbenchError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if mode == "synthetic" and method != DEFAULT_METHOD:
        raise SpecbenchError(f"the synthetic mode accepts by its profile, so it has no {method} rule: use "
                             f"method='token' (or the probabilistic mode)")
    return method


def parse_methods(text: str) -> list[str]:
    """A comma-separated list of method names (``--method token,block``), each once, in order."""
    names = [name.strip() for name in text.split(",")]
    if not any(names):
        raise SpecbenchError(f"--method needs at least one of {', '.join(METHODS)}")
    if not all(names):  # "token," or "token,,block": a list with a hole is a typo, as every other list option says
        raise SpecbenchError(f"--method takes comma-separated values, got {text!r}")
    for name in names:
        if name not in METHODS:
            raise SpecbenchError(f"unknown method {name!r}; choose from {', '.join(METHODS)}")
    return list(dict.fromkeys(names))


def is_exact(method: str) -> bool:
    """Whether ``method``'s output follows the target's law (False: lossy)."""
    return METHODS[check_method(method)].exact
