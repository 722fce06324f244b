"""The Triton backend: launchers with the same signatures as ``specbench/reference.py``.

Inputs arrive checked and normalised by ``specbench.verify.verify``. The launcher picks the
kernel shape: one program per request that stops at the first rejection when the batch fills
the GPU, and the vocabulary split across programs when it does not (``specbench/kernels/split.py``).
"""

from __future__ import annotations

import torch
import triton

from specbench.kernels.sequential import _verify_sequential_kernel
from specbench.kernels.synthetic import _simulate_kernel
from specbench.verify import VerifyResult

_MODE_IDS = {"greedy": 0, "probabilistic": 1, "synthetic": 2}
_SIMULATE_BLOCK = 1024


def _draft_kind(draft_logits: torch.Tensor | None, draft_probs: torch.Tensor | None) -> int:
    if draft_logits is not None:
        return 1
    if draft_probs is not None:
        return 2
    return 0


def _block_size(vocab: int, device: torch.device) -> int:
    # the interpreter runs a chunk as numpy arrays: small chunks for small rows
    return min(triton.next_power_of_2(vocab), 4096 if device.type == "cuda" else 1024)


def verify(
    *,
    mode: str,
    target_logits: torch.Tensor,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
) -> VerifyResult:
    """Triton verification step; see ``specbench.verify.verify`` for arguments and results."""
    batch, num_slots, vocab = target_logits.shape
    device = target_logits.device
    out = torch.empty((batch, num_slots), dtype=torch.int64, device=device)
    num_emitted = torch.empty(batch, dtype=torch.int32, device=device)
    num_accepted = torch.empty(batch, dtype=torch.int32, device=device)
    if batch == 0:
        return VerifyResult(out, num_emitted, num_accepted)
    draft_kind = _draft_kind(draft_logits, draft_probs)
    draft = draft_logits if draft_logits is not None else draft_probs
    if draft is None:
        draft = target_logits  # never read: DRAFT == 0
    draft_ids = draft_token_ids if draft_token_ids.numel() else torch.full((batch, 1), -1, dtype=torch.int64,
                                                                           device=device)
    block = _block_size(vocab, device)
    num_warps = 8 if block >= 2048 else 4
    _verify_sequential_kernel[(batch,)](
        out, out.stride(0),
        num_emitted,
        num_accepted,
        target_logits, target_logits.stride(0), target_logits.stride(1),
        draft, draft.stride(0), draft.stride(1),
        draft_ids, draft_ids.stride(0),
        num_draft_tokens,
        temperatures,
        seeds,
        positions,
        conditional_rates,
        vocab, num_slots,
        MODE=_MODE_IDS[mode],
        DRAFT=draft_kind,
        BLOCK=block,
        OUT_BLOCK=triton.next_power_of_2(num_slots),
        num_warps=num_warps,
    )
    return VerifyResult(out, num_emitted, num_accepted)


def simulate(*, conditional_rates: torch.Tensor, num_requests: int, first_seed: int) -> torch.Tensor:
    """Drafts accepted per synthetic step, request ``r`` seeded ``first_seed + r`` at position 0.

    ``conditional_rates`` ``[K]`` float32; returns ``[num_requests]`` int32.
    """
    counts = torch.empty(num_requests, dtype=torch.int32, device=conditional_rates.device)
    grid = (triton.cdiv(num_requests, _SIMULATE_BLOCK),)
    _simulate_kernel[grid](
        counts, conditional_rates, first_seed, num_requests, conditional_rates.numel(), BLOCK=_SIMULATE_BLOCK
    )
    return counts
