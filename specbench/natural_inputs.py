"""Natural inputs for ``specbench kernels`` and ``sweep``: drafts drawn from a draft distribution, so rules differ.

``make_inputs`` (``specbench/bench.py``) plans acceptance by construction: each draft is accepted or
rejected whatever the rule, so every verification method accepts the same drafts. Natural inputs
instead give every request a draft model that differs from the target by a stated amount:

- target logits ``z ~ N(0, 1)`` ``[B, K + 1, V]`` in the case's dtype (temperature 1);
- draft logits ``z[:, :K] + draft_noise * N(0, 1)`` ``[B, K, V]``: ``q = softmax(draft logits)``;
- each draft ``x_i`` drawn from ``q_i`` (the Gumbel-max trick on the draft logits, from the run's seed);
- the case's draft form: the draft logits, their softmax (``draft="probs"``), or nothing (one-hot).

The mean accepted length of each method is then measured on the same inputs, and its expectation
given the drawn drafts (the acceptance uniforms integrated out) is computed exactly in float64 by
``expected_acceptance_length`` (from ``accepted_rates``, each request's ``P(A >= i)``, which a natural sweep,
``specbench/natural_sweep.py``, checks its counts against). Natural inputs are for the probabilistic mode,
untruncated.
"""

from __future__ import annotations

import torch

from specbench import methods, rng
from specbench.errors import SpecbenchError

INPUTS: tuple[str, ...] = ("planned", "natural")
DEFAULT_DRAFT_NOISE = 1.0


def check_natural(mode: str, truncated: bool, draft_noise: float) -> None:
    """Refuse what natural inputs do not cover, in one sentence each."""
    if mode != "probabilistic":
        raise SpecbenchError(f"--inputs natural draws drafts from a draft distribution: it is for the probabilistic "
                             f"mode, not {mode} (pass --mode probabilistic, or use --inputs planned)")
    if truncated:
        raise SpecbenchError("--inputs natural draws drafts from the untruncated q: it cannot be combined with "
                             "--top-k, --top-p, --min-p or --sampling mixed yet")
    if not draft_noise >= 0 or draft_noise == float("inf"):
        raise SpecbenchError(f"--draft-noise must be a finite number >= 0, got {draft_noise}")


def natural_tensors(batch: int, num_spec: int, vocab: int, draft_noise: float, dtype: torch.dtype,
                    device: torch.device, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(target_logits [B, K + 1, V], draft_logits [B, K, V], draft_token_ids [B, K] int64)``: the module
    docstring's inputs, drafts drawn from ``softmax(draft_logits)``."""
    gen = torch.Generator(device=device).manual_seed(seed)
    target = torch.randn(batch, num_spec + 1, vocab, generator=gen, dtype=dtype, device=device)
    draft = target[:, :num_spec] + draft_noise * torch.randn(batch, num_spec, vocab, generator=gen, dtype=dtype,
                                                             device=device)
    # Gumbel-max: argmax(z + G), G = -log(-log U), is a draw from softmax(z), chunked by slot to bound memory
    drafts = torch.empty(batch, num_spec, dtype=torch.int64, device=device)
    for i in range(num_spec):
        u = torch.rand(batch, vocab, generator=gen, device=device).clamp_min(torch.finfo(torch.float32).tiny)
        drafts[:, i] = (draft[:, i].float() - torch.log(-torch.log(u))).argmax(dim=-1)
    return target, draft, drafts


def request_seeds(seed: int, batch: int, device: torch.device) -> torch.Tensor:
    """The requests' seeds, as planned inputs and sweeps give them."""
    return rng.request_seed(seed, torch.arange(batch, dtype=torch.int64)).to(device)


def expected_acceptance_length(target_logits: torch.Tensor, draft_token_ids: torch.Tensor,
                               draft_logits: torch.Tensor | None, draft_probs: torch.Tensor | None,
                               method: str) -> float:
    """``1 + mean_b E[A_b | drafts]`` in float64: each request's expected accepted count given its drafts,
    the acceptance uniforms integrated out, under ``method``'s rule (``specbench/verification.py``) at
    temperature 1, untruncated (``accepted_rates`` summed over positions)."""
    rates = accepted_rates(target_logits, draft_token_ids, draft_logits, draft_probs, method)
    return 1.0 + (float(rates.sum(dim=1).mean()) if rates.numel() else 0.0)


def accepted_rates(target_logits: torch.Tensor, draft_token_ids: torch.Tensor, draft_logits: torch.Tensor | None,
                   draft_probs: torch.Tensor | None, method: str) -> torch.Tensor:
    """``[B, K]`` float64: ``P(A_b >= i | drafts)``, ``i = 1..K``, for each request under ``method``'s rule at
    temperature 1, untruncated, the acceptance uniforms integrated out: ``prod_{j<i} a_j`` for the per-row rules
    (``a_j`` the chance that row ``j`` accepts its draft), ``sum_{k>=i} h_k prod_{j>k} (1 - h_j)`` for block
    verification (``h_k`` the chance of stopping after ``k`` drafts)."""
    batch, num_rows = target_logits.shape[:2]
    num_spec = num_rows - 1
    device = target_logits.device
    if batch == 0 or num_spec == 0:
        return torch.zeros(batch, max(num_spec, 0), dtype=torch.float64, device=device)
    drafts = draft_token_ids.to(torch.int64)
    weight = torch.ones(batch, dtype=torch.float64, device=device)  # block: w_i
    stop = torch.zeros(batch, num_spec + 1, dtype=torch.float64, device=device)  # block: h_i
    accept = torch.zeros(batch, num_spec, dtype=torch.float64, device=device)  # the per-row rules: a_i
    for i in range(num_spec):  # one row at a time: [B, V] float64 at most
        p = torch.softmax(target_logits[:, i].double(), dim=-1)
        if draft_probs is not None:
            q = draft_probs[:, i].double()
        elif draft_logits is not None:
            q = torch.softmax(draft_logits[:, i].double(), dim=-1)
        else:
            q = torch.zeros_like(p).scatter_(1, drafts[:, i, None], 1.0)  # one-hot drafts
        p_x, q_x = p.gather(1, drafts[:, i, None])[:, 0], q.gather(1, drafts[:, i, None])[:, 0]
        if method == "block":
            if i > 0:
                left = (weight[:, None] * p - q).clamp_min(0.0).sum(dim=-1)
                stop[:, i] = torch.where(left > 0, torch.minimum(left / (left + 1.0 - weight), weight), 0.0)
            mass = weight * p_x
            weight = torch.where(mass > 0, torch.where(mass >= q_x, 1.0, mass / q_x), 0.0)
            continue
        rate = torch.where(q_x > 0, (p_x / q_x).clamp(max=1.0), (p_x > 0).double())  # min(1, p(x) / q(x))
        if method in ("typical", "relaxed"):
            entropy = -torch.where(p > 0, p * torch.log(p), 0.0).sum(dim=-1)
            if method == "typical":
                threshold = (methods.TYPICAL_DELTA * torch.exp(-entropy)).clamp(max=methods.TYPICAL_EPSILON)
                rate = (p_x > threshold).double()
            else:
                margin = torch.log(p.amax(dim=-1)) - torch.log(p_x)
                loose = (p_x > 0) & (entropy >= methods.RELAXED_MIN_ENTROPY) & (margin <= methods.RELAXED_MARGIN)
                rate = torch.where(loose, 1.0, rate)
        accept[:, i] = rate
    if method != "block":
        return torch.cumprod(accept, dim=1)
    stop[:, num_spec] = weight  # h_n = w_n
    exactly = torch.zeros(batch, num_spec, dtype=torch.float64, device=device)  # P(A = k), k = 1..K
    survive = torch.ones(batch, dtype=torch.float64, device=device)
    for k in range(num_spec, 0, -1):
        exactly[:, k - 1] = stop[:, k] * survive
        survive = survive * (1.0 - stop[:, k])
    return exactly.flip(1).cumsum(dim=1).flip(1)
