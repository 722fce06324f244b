"""Natural-input sweeps: each verification method's acceptance at scale on drafts drawn from a draft model.

A natural case (``sweep --inputs natural``) is ``K`` draft tokens, a method (``token``, ``block``, ``typical`` or
``relaxed``), a draft noise and a vocabulary size. Its steps are natural inputs (``specbench/natural_inputs.py``):
target logits ``N(0, 1)``, draft logits the target's plus noise of that std, each draft drawn from the draft
softmax; every step runs through ``specbench.verify`` with the method (temperature 1, untruncated, draft logits
given), in chunks of ``CHUNK_REQUESTS`` requests, each chunk's inputs and request seeds from its own seed
``rng.request_seed(case_seed, chunk)``. So the same case gives the same inputs on every backend, and a case's
result does not depend on the other cases of the run.

What is checked (``sweep.measure``, the chain sweep's families and verdicts): the accepted-count histogram against
the exact rates ``p_i = mean_b P(A_b >= i | drafts)`` of the very inputs drawn (``natural_inputs.accepted_rates``,
float64, the uniforms integrated out). The requests' laws differ (each has its own drafts), and the checks treat the
counts as draws from their average law: the counts' true variance is no larger (a Poisson-binomial's is at most the
binomial's of the mean rate), so the checks are conservative, never falsely strict. ``expected_acceptance_length``
is ``1 + sum_i p_i``; the speed-up charges the ``K`` tokens a step verifies, as a chain's does.

A natural case's record is a sweep record (``kind = "sweep"``) with ``inputs = "natural"``, ``method``,
``draft_noise`` and ``vocab_size``; ``configured_rates`` holds the exact rates above (what the inputs give, not a
setting). A lossy method's record measures its own rule, as ``verify`` holds it to its own law.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import torch

from specbench import acceptance, methods, natural_inputs, rng, sweep
from specbench.errors import SpecbenchError
from specbench.verification import verify

CHUNK_REQUESTS = 256  # requests per verify call: [256, K + 1, V] float32 logits, 0.2 GB at K = 7, V = 32768
DEFAULT_VOCAB_SIZE = 32768
DEFAULT_NUM_REQUESTS = 16384  # about +-0.02 on the mean length at K = 4
MAX_VOCAB_SIZE = 1 << 18
TRITON_METHODS = ("token", "block")  # the methods the Triton backend runs (the others: torch)


@dataclass(frozen=True)
class NaturalCase:
    """One natural-input case of a sweep (what ``sweep.run_sweep`` runs beside profiles and tree cases)."""

    num_spec_tokens: int
    method: str
    draft_noise: float
    vocab_size: int
    cost_ratio: float | None = None
    rates = None  # the exact rates come from the inputs drawn (the record's configured_rates)

    @property
    def name(self) -> str:
        return f"natural {self.method} noise={self.draft_noise:g} V={self.vocab_size}"


def natural_cases(ks: list[int], method_names: list[str], draft_noises: list[float],
                  vocab_size: int) -> list[NaturalCase]:
    """Every ``K`` under every method and draft noise, each checked (one sentence a refusal)."""
    if not ks:
        raise SpecbenchError("a natural sweep needs at least one --num-spec-tokens, got none")
    for k in ks:
        if not 1 <= k <= acceptance.MAX_NUM_SPEC_TOKENS:
            raise SpecbenchError(f"--num-spec-tokens must lie in [1, {acceptance.MAX_NUM_SPEC_TOKENS}] for natural "
                                 f"inputs, got {k}")
    for name in method_names:
        methods.check_method(name)
    for noise in draft_noises:
        natural_inputs.check_natural("probabilistic", False, noise)
    if not 2 <= vocab_size <= MAX_VOCAB_SIZE:
        raise SpecbenchError(f"--vocab-size must lie in [2, {MAX_VOCAB_SIZE}] for natural inputs, got {vocab_size}")
    return [NaturalCase(k, name, float(noise), vocab_size)
            for noise in draft_noises for name in method_names for k in ks]


def check_backend(cases: list[NaturalCase], backend: str) -> None:
    """Refuse ``--backend triton`` for a method it has no kernel for."""
    if backend == "triton":
        for case in cases:
            if case.method not in TRITON_METHODS:
                raise SpecbenchError(f"--backend triton runs the {' and '.join(TRITON_METHODS)} methods; "
                                     f"{case.method} runs on --backend torch (or leave --backend out)")


def num_checks(case: NaturalCase) -> int:
    """Distinct checks of one natural case: ``3K``, as a chain profile's (``sweep.num_checks``)."""
    return 3 * case.num_spec_tokens


def case_seed(seed: int, case: NaturalCase) -> int:
    """The case's own seed: the run's seed mixed with a key of its K, method, noise (exact bits) and vocabulary."""
    text = f"natural K={case.num_spec_tokens} method={case.method} noise={float(case.draft_noise).hex()} " \
           f"V={case.vocab_size}"
    return sweep.keyed_seed(seed, text)


def run_natural_case(
    case: NaturalCase,
    *,
    num_requests: int,
    seed: int,
    backend: str,
    device: str,
    cost_ratio: float,
    bug_p: float,
    scenario: str | None = None,
    on_progress: sweep.Progress | None = None,
) -> dict[str, Any]:
    """Verify ``num_requests`` natural steps of one case and return its record (module docstring)."""
    k = case.num_spec_tokens
    own_seed = case_seed(seed, case)
    target_device = torch.device(device)
    histogram = [0] * (k + 1)
    rate_sums = torch.zeros(k, dtype=torch.float64)
    seconds = 0.0
    for chunk, start in enumerate(range(0, num_requests, CHUNK_REQUESTS)):
        batch = min(CHUNK_REQUESTS, num_requests - start)
        chunk_seed = int(rng.request_seed(own_seed, chunk))
        target, draft_logits, drafts = natural_inputs.natural_tensors(batch, k, case.vocab_size, case.draft_noise,
                                                                      torch.float32, target_device, chunk_seed)
        began = time.perf_counter()
        result = verify(target, drafts, draft_logits=draft_logits, mode="probabilistic", method=case.method,
                        temperatures=torch.ones(batch, dtype=torch.float32, device=target_device),
                        seeds=natural_inputs.request_seeds(chunk_seed, batch, target_device),
                        positions=torch.zeros(batch, dtype=torch.int64, device=target_device), backend=backend)
        counts = torch.bincount(result.num_accepted.long().cpu(), minlength=k + 1)
        seconds += time.perf_counter() - began
        histogram = [h + int(c) for h, c in zip(histogram, counts.tolist())]
        rate_sums += natural_inputs.accepted_rates(target, drafts, draft_logits, None, case.method).sum(dim=0).cpu()
        if on_progress is not None:
            on_progress(batch * k)
    rates = (rate_sums / num_requests).tolist()
    record: dict[str, Any] = {
        "kind": "sweep", "scenario": scenario, "profile": case.name, "source": "",
        "num_spec_tokens": k, "inputs": "natural", "method": case.method, "draft_noise": case.draft_noise,
        "vocab_size": case.vocab_size,
        "configured_acceptance_length": acceptance.mean_acceptance_length(rates),
        "schedule": None, "configured_alpha": None, "configured_rates": rates,
        "num_requests": num_requests, "seed": seed, "case_seed": own_seed, "backend": backend, "device": device,
    }
    record.update(sweep.measure(histogram, rates, bug_p=bug_p))
    record.update(**sweep.speedup_fields(record, k, cost_ratio), lossy=not methods.is_exact(case.method),
                  **sweep.throughput_fields(num_requests * k, seconds))
    return record
