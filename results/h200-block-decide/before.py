"""Block verification's split path as it was before the decide kernel, to time beside it in one process.

``--impl results/h200-block-decide/before.py:triton_before`` is specbench's Triton backend with one change: a
``method="block"`` call takes the split path of three launches that main had at bc4144a (the rows' statistics and
the forward pass; every residual mass the backward pass may need, then the backward pass; the terminal row's race,
which reads that row again), from that commit's ``specbench/kernels/block.py``. ``run.sh`` writes the file to
``.old/block_before.py`` (``git show``; ``BLOCK_BEFORE`` names another path). Every other call is today's code,
and the kernels the old file imports (decide, rows, split, rng) are unchanged since.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import replace
from pathlib import Path

import torch

from specbench.implementations.builtin import BUILT_IN
from specbench.kernels import launch

_FILE = Path(os.environ.get("BLOCK_BEFORE", ".old/block_before.py"))
_SPEC = importlib.util.spec_from_file_location("block_before", _FILE)
before = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(before)
_ROWS, _MASSES, _RACE = (launch._Launcher(kernel) for kernel in
                         (before._block_rows_kernel, before._block_masses_kernel, before._block_race_kernel))


def _verify_block_before(*, target_logits, target_probs, draft_token_ids, num_draft_tokens, draft_logits, draft_probs,
                         temperatures, seeds, positions):
    # the split path's launches as launch._verify_block made them before the decide kernel (always split here)
    step = launch._Step.of(target_logits, target_probs, draft_logits, draft_probs, draft_token_ids)
    target, draft, draft_ids = step.target, step.draft, step.draft_ids
    batch, num_slots, vocab = target.shape
    out, num_emitted, num_accepted = step.result[:3]
    if batch == 0:
        return step.result
    device = target.device
    key = launch._stream_key(device)
    rows = (target, target.stride(0), target.stride(1), draft, draft.stride(0), draft.stride(1), draft_ids,
            draft_ids.stride(0), num_draft_tokens, temperatures, seeds, positions)
    out_block = launch._next_power_of_2(num_slots)
    block, num_warps = launch._launch_shape(vocab, device, True, "probabilistic", batch)
    row_splits, row_chunk = launch._slices(batch * num_slots, vocab, block, device)
    race_splits, race_chunk = launch._slices(batch, vocab, block, device)
    scratch_f = launch._scratch(batch * (num_slots * row_splits * 5 + race_splits * 2 + 5 * out_block), torch.float32,
                                device, key)
    scratch_i = launch._scratch(batch * (num_slots * row_splits + race_splits * 2 + 3), torch.int32, device, key)
    arrivals = launch._arrival_counters(batch, device, key)
    sizes = {"BLOCK": block, "OUT_BLOCK": out_block, "S_BLOCK": launch._next_power_of_2(max(row_splits, race_splits)),
             "DRAFT": step.draft_kind, "TARGET_PROBS": step.target_is_probs}
    outputs = (out, out.stride(0), num_emitted, num_accepted)
    for launcher in (_ROWS, _MASSES):
        launcher((batch, num_slots, row_splits),
                 (scratch_f, scratch_i, arrivals, *outputs, *rows, vocab, num_slots, row_splits, race_splits, row_chunk),
                 num_warps, key, **sizes)
    _RACE((batch, race_splits),
          (scratch_f, scratch_i, arrivals, out, out.stride(0), num_emitted, *rows, vocab, num_slots, row_splits,
           race_splits, race_chunk),
          num_warps, key, **sizes)
    return step.result


def _prepare(kwargs):
    step = BUILT_IN["triton"].prepare(kwargs)

    def before_step():
        today, launch._verify_block = launch._verify_block, _verify_block_before
        try:
            return step()
        finally:
            launch._verify_block = today

    return before_step


triton_before = replace(BUILT_IN["triton"], name="triton-before",
                        description="Triton, block's split path in three launches as before the decide kernel",
                        prepare=_prepare, source="results/h200-block-decide/before.py:triton_before")
