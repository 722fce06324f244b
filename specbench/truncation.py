"""Truncation (``top_k``, ``top_p``, ``min_p``) of cleaned rows, in float32 torch, batched.

The rules are those of ``specbench/verification.py``'s module docstring ("Truncation"); this is
their readable torch form, shared by the reference backend and any other code that needs the kept
set of a row (a converter, a negative control):

- ``values`` ``[..., V]`` float32 are what a row is ranked by: the cleaned, tempered logits
  ``z = clean(logit * (1 / T))``, or the cleaned target probabilities (``is_probs``; an entry
  ``<= 0`` has no mass).
- The order is value descending, ties to the lowest id; every knob keeps a prefix of it.
- Masses ``w = exp(z - m)`` (``m`` the row's largest ``z``) or the probabilities themselves.
- ``min_p`` keeps ``w >= min_p`` (probabilities: ``p >= min_p * max p``); then ``top_k`` keeps the
  first ``top_k`` tokens; then ``top_p`` keeps a token iff the float32 cumulative mass of the kept
  tokens before it is ``< top_p * M`` (``M`` the mass that ``min_p`` and ``top_k`` kept). The first
  token of a row with any mass always survives; a token with no finite value (no mass) never does.

Knobs are tensors broadcastable to ``values.shape[:-1]`` (one value per row), or None for off.
Off values: ``top_k`` ``<= 0`` or ``>= V``, ``top_p`` ``>= 1`` or NaN, ``min_p`` ``<= 0`` or NaN.
"""

from __future__ import annotations

import torch

_NEG_INF = float("-inf")


def ranking_values(values: torch.Tensor, is_probs: bool) -> torch.Tensor:
    """``[..., V]``: what the order sorts by, with ``-inf`` for every token that has no mass."""
    if is_probs:
        return torch.where(values > 0, values, _NEG_INF)
    return values


def masses(values: torch.Tensor, is_probs: bool) -> torch.Tensor:
    """``[..., V]`` float32 masses: ``exp(z - m)`` (zeros for a row with no finite value), or the
    probabilities with no mass as 0."""
    if is_probs:
        return torch.where(values > 0, values, 0.0)
    row_max = values.amax(dim=-1, keepdim=True)
    return torch.exp(values - torch.where(row_max > _NEG_INF, row_max, 0.0))


def active(top_k: torch.Tensor | None, top_p: torch.Tensor | None, min_p: torch.Tensor | None,
           vocab: int) -> torch.Tensor | bool:
    """Whether any knob is on, per row (a bool tensor), or False when every knob is None."""
    on: torch.Tensor | bool = False
    if top_k is not None:
        on = on | ((top_k > 0) & (top_k < vocab))
    if top_p is not None:
        on = on | (top_p < 1)
    if min_p is not None:
        on = on | (min_p > 0)
    return on


def kept_mask(values: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None,
              min_p: torch.Tensor | None, is_probs: bool) -> torch.Tensor:
    """``[..., V]`` bool: the tokens each row keeps (module docstring). A row with every knob off
    keeps every token with mass; a row with no mass keeps nothing."""
    vocab = values.shape[-1]
    ranked = ranking_values(values.to(torch.float32), is_probs)
    # stable sort of the negated values: largest first, equal values in increasing id order
    order = torch.sort(-ranked, dim=-1, stable=True).indices
    weight = masses(values.to(torch.float32), is_probs).gather(-1, order)
    has_mass = ranked.gather(-1, order) > _NEG_INF
    keep = has_mass.clone()
    if min_p is not None:
        min_p = min_p.to(torch.float32)[..., None]
        threshold = min_p * weight[..., :1] if is_probs else min_p  # probabilities: min_p * max p
        keep &= ~(min_p > 0) | (weight >= threshold)
    if top_k is not None:
        top_k = top_k[..., None]
        rank = torch.arange(vocab, device=values.device)
        keep &= ~((top_k > 0) & (top_k < vocab)) | (rank < top_k)
    if top_p is not None:
        top_p = top_p.to(torch.float32)[..., None]
        kept_weight = torch.where(keep, weight, 0.0)
        inclusive = torch.cumsum(kept_weight, dim=-1)
        before = torch.cat([torch.zeros_like(inclusive[..., :1]), inclusive[..., :-1]], dim=-1)
        total = inclusive[..., -1:]
        keep &= ~(top_p < 1) | (before < top_p * total)
    # the first token survives every knob (top_p <= 0 and min_p > 1 keep only it), when it has mass
    keep[..., 0] |= has_mass[..., 0]
    return torch.zeros_like(keep).scatter(-1, order, keep)


def truncated_masses(values: torch.Tensor, mask: torch.Tensor, is_probs: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """``(w', S)``: the kept masses ``[..., V]`` (0 outside the mask) and their sum ``[...]``; ``p' = w' / S``."""
    kept = torch.where(mask, masses(values.to(torch.float32), is_probs), 0.0)
    return kept, kept.sum(dim=-1)


def truncated_probs(values: torch.Tensor, mask: torch.Tensor, is_probs: bool) -> torch.Tensor:
    """``p'`` ``[..., V]``: the kept masses over their sum (zeros for a row that keeps nothing)."""
    kept, total = truncated_masses(values, mask, is_probs)
    return kept / total.clamp_min(torch.finfo(torch.float32).tiny)[..., None]
