"""Adapters for the samplers of other projects, imported only when used (a missing package is a
one-line note, never a traceback).

- ``flashinfer``: ``flashinfer.sampling.chain_speculative_sampling`` (FlashInfer 0.6): target and
  draft probabilities in, ``[B, K + 1]`` int32 tokens with ``-1`` padding out, plus the number of
  draft tokens emitted. It has no count of drafts per request (no ragged batches) and reads the
  draft id's row unchecked (no ``-1`` drafts). Each request gets its own Philox seed (``seeds``)
  and offset (from ``positions``), both device tensors, so calls can be captured in a CUDA graph.
- ``flashinfer-truncated``: the same sampler after FlashInfer's own truncation, as SGLang runs it:
  ``flashinfer.sampling.top_k_renorm_probs`` then ``top_p_renorm_probs`` on the target
  probabilities (flattened to ``[B * (K + 1), V]``, each request's ``top_k`` (int32, off as ``V``)
  and ``top_p`` (float32) repeated over its rows; a knob not given is not applied), then
  ``chain_speculative_sampling`` as above. Draft probabilities are taken as given (the harness
  truncates converted draft logits, ``contract.convert``). FlashInfer has no min-p
  renormalisation, so a case with any ``min_p`` is declined (a skipped row), never run without it.
  Known differences from specbench's contract, which ``specbench verify`` flags on inputs with
  ties: FlashInfer's top-k keeps every token tied with the k-th value (specbench keeps exactly
  ``k``, the lowest ids), and its top-p keeps every token tied with the boundary value (specbench
  cuts between ties by id). Renormalising probabilities, it also cannot tell a greedy row (one-hot
  after conversion) from a sampled one, which is harmless: top-k/top-p keep a one-hot row as is.
- ``vllm``: vLLM V1's ``vllm.v1.sample.rejection_sampler.rejection_sample`` (the signature of
  ``rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens,
  draft_probs, target_probs, bonus_token_ids, sampling_metadata)``): requests flattened to
  ``[num_tokens, V]``, counts and greedy flags read on the host as vLLM's scheduler has them,
  and the bonus token drawn by the caller (here, in the timed call, from the bonus row with
  torch's generator). It takes ``draft_probs=None`` for one-hot (n-gram) drafts.
"""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import torch

from specbench.errors import SpecbenchError
from specbench.implementations.contract import Implementation, sampler
from specbench.verification import VerifyResult


def _missing(module: str, package: str, project: str):
    def unavailable(device: torch.device) -> str | None:
        if importlib.util.find_spec(module) is None:
            return f"{project} is not installed (pip install {package})"
        return None

    return unavailable


@sampler(name="flashinfer", description="FlashInfer chain_speculative_sampling (probabilities in)",
         modes=["probabilistic"], target="probs", draft="probs", rng="own", seeded=True, ragged=False,
         invalid_drafts=False, cuda_graph=True, devices=["cuda"])
def flashinfer(*, target_probs, draft_probs, draft_token_ids, seeds, positions, **_) -> VerifyResult:
    from flashinfer.sampling import chain_speculative_sampling

    num_rows = target_probs.shape[1]
    tokens, _independent, emitted = chain_speculative_sampling(
        draft_probs, draft_token_ids.to(torch.int32), target_probs, deterministic=True,
        seed=seeds, offset=positions * num_rows)
    num_accepted = emitted.to(torch.int32)
    return VerifyResult(tokens.to(torch.int64), num_accepted + 1, num_accepted)


@sampler(name="flashinfer-truncated", description="FlashInfer top_k_renorm_probs, top_p_renorm_probs, then "
         "chain_speculative_sampling (probabilities in; no min_p)", modes=["probabilistic"], target="probs",
         draft="probs", rng="own", seeded=True, ragged=False, invalid_drafts=False, cuda_graph=True, truncation=True,
         devices=["cuda"])
def flashinfer_truncated(*, target_probs, draft_probs, draft_token_ids, seeds, positions, top_k=None, top_p=None,
                         min_p=None, **_) -> VerifyResult:
    from flashinfer.sampling import chain_speculative_sampling, top_k_renorm_probs, top_p_renorm_probs

    if min_p is not None and bool((min_p > 0).any()):  # read once, before timing: the harness calls it untimed first
        raise SpecbenchError("flashinfer-truncated declines min_p: FlashInfer has no min-p renormalisation to apply "
                             "before chain_speculative_sampling")
    batch, num_rows, vocab = target_probs.shape
    rows = target_probs.reshape(batch * num_rows, vocab)
    if top_k is not None:  # specbench's 0 (off) is V for FlashInfer, which keeps every token then
        per_row = torch.where(top_k > 0, top_k, vocab).clamp(max=vocab).to(torch.int32)
        rows = top_k_renorm_probs(rows, per_row.repeat_interleave(num_rows))
    if top_p is not None:
        rows = top_p_renorm_probs(rows, top_p.to(torch.float32).repeat_interleave(num_rows))
    tokens, _independent, emitted = chain_speculative_sampling(
        draft_probs, draft_token_ids.to(torch.int32), rows.reshape(batch, num_rows, vocab), deterministic=True,
        seed=seeds, offset=positions * num_rows)
    num_accepted = emitted.to(torch.int32)
    return VerifyResult(tokens.to(torch.int64), num_accepted + 1, num_accepted)


@sampler(name="vllm", description="vLLM V1 rejection_sample (probabilities in, bonus drawn by the caller)",
         modes=["greedy", "probabilistic"], target="probs", draft="probs", one_hot=True, rng="own",
         invalid_drafts=False, devices=["cuda"])
def vllm(*, target_probs, draft_token_ids, num_draft_tokens, temperatures, draft_probs=None, **_) -> VerifyResult:
    from types import SimpleNamespace

    from vllm.v1.sample import rejection_sampler

    batch, num_rows, _ = target_probs.shape
    device = target_probs.device
    counts = num_draft_tokens.to(torch.int64)
    in_request = torch.arange(num_rows - 1, device=device)[None, :] < counts[:, None]  # [B, K]
    greedy = temperatures == 0
    # the bonus row of each request (row n_b): argmax for a greedy request, else a draw from p
    bonus_probs = target_probs[torch.arange(batch, device=device), counts].float()
    drawn = torch.multinomial(bonus_probs.clamp_min(0), 1)[:, 0]
    bonus = torch.where(greedy, bonus_probs.argmax(dim=-1), drawn)
    greedy_value = getattr(rejection_sampler, "GREEDY_TEMPERATURE", -1)
    metadata = SimpleNamespace(
        all_greedy=bool(greedy.all()), all_random=not bool(greedy.any()), generators={},
        temperature=torch.where(greedy, float(greedy_value), temperatures), top_k=None, top_p=None)
    output = rejection_sampler.rejection_sample(
        draft_token_ids[in_request].contiguous(), counts.tolist(), num_rows - 1,
        torch.cumsum(counts, 0).to(torch.int32),
        None if draft_probs is None else draft_probs[in_request].contiguous(),
        target_probs[:, :-1][in_request].contiguous(), bonus[:, None].contiguous(), metadata)
    output = output.to(torch.int64)
    num_emitted = (output != -1).to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    return VerifyResult(output, num_emitted, num_emitted - 1)


ADAPTERS: dict[str, Implementation] = {
    "flashinfer": replace(flashinfer, unavailable=_missing("flashinfer", "flashinfer-python", "FlashInfer")),
    "flashinfer-truncated": replace(flashinfer_truncated,
                                    unavailable=_missing("flashinfer", "flashinfer-python", "FlashInfer")),
    "vllm": replace(vllm, unavailable=_missing("vllm", "vllm", "vLLM")),
}
