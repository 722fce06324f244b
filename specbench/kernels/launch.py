"""The Triton backend: launchers with the same signatures as ``specbench/reference.py``.

Inputs arrive checked and normalised by ``specbench.verification.verify``. The launcher picks the
kernel shape: one program per request that stops at the first rejection when the batch fills
the GPU (``specbench/kernels/sequential.py``), and the vocabulary split across programs when it
does not (``specbench/kernels/split.py``). Both give the same tokens for the same seeds.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import TypeVar

import numpy as np
import torch
import triton

from specbench.errors import SpecbenchError
from specbench.kernels.sequential import _verify_sequential_kernel
from specbench.kernels.split import _split_residual_kernel, _split_stats_kernel
from specbench.kernels.synthetic import _simulate_kernel
from specbench.verification import VerifyResult

# Under TRITON_INTERPRET=1 the kernels run as numpy: lanes the kernels mask or select away may
# compute -inf - -inf or overflow, which numpy would report as warnings. On a GPU those lanes are
# free; a guard per token there would cost instructions in loops bound by instruction issue.
INTERPRETED = not isinstance(_verify_sequential_kernel, triton.runtime.JITFunction)
_Launcher = TypeVar("_Launcher", bound=Callable)


def _quiet_under_interpreter(launcher: _Launcher) -> _Launcher:
    @functools.wraps(launcher)
    def wrapper(**kwargs):
        if not INTERPRETED:
            return launcher(**kwargs)
        with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
            return launcher(**kwargs)

    return wrapper  # type: ignore[return-value]


_MODE_IDS = {"greedy": 0, "probabilistic": 1, "synthetic": 2}
_SIMULATE_BLOCK = 1024
STRATEGIES = ("auto", "sequential", "split")
_strategy = "auto"
# Launch shapes (tokens per chunk, warps per program) chosen from H200 measurements; TUNING
# overrides them when set (benchmarks use it to explore).
SEQUENTIAL_SHAPE = {"greedy": (2048, 8), "probabilistic": (8192, 32), "synthetic": (8192, 32)}
SPLIT_SHAPE = (2048, 8)
TUNING: dict[str, int | None] = {"block": None, "num_warps": None}


@contextlib.contextmanager
def strategy(name: str) -> Iterator[None]:
    """Force the kernel shape (``sequential`` or ``split``) inside a ``with`` block; for tests and timing."""
    global _strategy
    if name not in STRATEGIES:
        raise SpecbenchError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    previous, _strategy = _strategy, name
    try:
        yield
    finally:
        _strategy = previous


@functools.cache
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _splits_per_row(batch: int, num_slots: int, vocab: int, block: int, device: torch.device) -> int:
    """Vocabulary slices per row so that the split grid gives every multiprocessor a few programs."""
    if device.type != "cuda":
        return min(3, triton.cdiv(vocab, block))  # the interpreter: a few slices exercise the merge
    wanted = triton.cdiv(4 * _num_sms(device.index or 0), batch * num_slots)
    return max(1, min(wanted, triton.cdiv(vocab, block), 256))


# Which path wins, from `specbench kernels --impl triton-sequential,triton-split` on an H100 across
# B = 1..512, K = 4 and 7, V = 128256 and 151936, L = 3 and all accepted (results/kernels-launch-h100.md):
# greedy keeps the split until B * (K + 1) rows reach 5 per multiprocessor (B = 64 K = 4 V = 151936:
# 109 against 135 µs at L = 3, 82 against 212 all accepted; at B = 128 K = 4 equal at L = 3, 1.6x
# faster all accepted; at B = 128 K = 7 one program per request is 1.6x faster at L = 3). The other
# modes read a draft distribution or sample a row, and one program per request already wins from
# B = 64 at L = 3 (0.4-0.8x), so they split only while 4 programs per request fit on the GPU.
SPLIT_ROWS_PER_SM = {"greedy": 5.0}
SPLIT_REQUESTS_PER_SM = 0.25


def _use_split(batch: int, num_slots: int, mode: str, device: torch.device) -> bool:
    if _strategy != "auto":
        return _strategy == "split"
    if device.type != "cuda":
        return False
    num_sms = _num_sms(device.index or 0)
    if mode in SPLIT_ROWS_PER_SM:
        return batch * num_slots <= SPLIT_ROWS_PER_SM[mode] * num_sms
    return batch <= SPLIT_REQUESTS_PER_SM * num_sms


_arrivals: dict[tuple[str, int, int], torch.Tensor] = {}


def _arrival_counters(batch: int, device: torch.device) -> torch.Tensor:
    """Per-request arrival counters of the split kernels: zero on entry, left at zero on exit.

    Kept per (device, stream), so launches that may run at the same time never share one.
    """
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (device.type, device.index or 0, stream)
    counters = _arrivals.get(key)
    if counters is None or counters.numel() < batch:
        counters = torch.zeros(max(batch, 64), dtype=torch.int32, device=device)
        _arrivals[key] = counters
    return counters


def _alloc_scratch(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # the kernels read only scratch slots an earlier kernel of the same step wrote (tests poison this)
    return torch.empty(shape, dtype=dtype, device=device)


def _draft_kind(draft_logits: torch.Tensor | None, draft_probs: torch.Tensor | None) -> int:
    if draft_logits is not None:
        return 1
    if draft_probs is not None:
        return 2
    return 0


def _launch_shape(vocab: int, device: torch.device, split: bool, mode: str) -> tuple[int, int]:
    """(tokens per chunk, warps per program), measured on an H200 (results/kernels-tuning-h200.md)."""
    if device.type != "cuda":
        # the interpreter runs a chunk as numpy arrays: small chunks for small rows
        return min(triton.next_power_of_2(vocab), 1024), 4
    block, num_warps = SPLIT_SHAPE if split else SEQUENTIAL_SHAPE[mode]
    block = min(block, max(triton.next_power_of_2(vocab), 128))
    num_warps = min(num_warps, max(block // 256, 1))
    return TUNING["block"] or block, TUNING["num_warps"] or num_warps


@_quiet_under_interpreter
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
    """Triton verification step; see ``specbench.verification.verify`` for arguments and results."""
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
    split = _use_split(batch, num_slots, mode, device)
    block, num_warps = _launch_shape(vocab, device, split, mode)
    common = {"MODE": _MODE_IDS[mode], "DRAFT": draft_kind}
    inputs = (
        target_logits, target_logits.stride(0), target_logits.stride(1),
        draft, draft.stride(0), draft.stride(1),
        draft_ids, draft_ids.stride(0),
        num_draft_tokens, temperatures, seeds, positions,
    )
    if split:
        splits = _splits_per_row(batch, num_slots, vocab, block, device)
        chunk = triton.cdiv(triton.cdiv(vocab, splits), block) * block
        splits = triton.cdiv(vocab, chunk)
        sizes = {"S_BLOCK": triton.next_power_of_2(splits), "OUT_BLOCK": triton.next_power_of_2(num_slots)}
        stats_f = _alloc_scratch((batch, num_slots, splits, 6), torch.float32, device)
        stats_i = _alloc_scratch((batch, num_slots, splits, 2), torch.int32, device)
        residual_pass = draft_kind != 0 and mode == "probabilistic"
        arrivals = _arrival_counters(batch, device)
        outputs = (out, out.stride(0), num_emitted, num_accepted)
        _split_stats_kernel[(batch, num_slots, splits)](
            stats_f, stats_i, *inputs, conditional_rates, arrivals, *outputs, vocab, num_slots, splits, chunk,
            FINALIZE=not residual_pass, BLOCK=block, num_warps=num_warps, **sizes, **common,
        )
        if residual_pass:
            residual_f = _alloc_scratch((batch, splits, 4), torch.float32, device)
            residual_i = _alloc_scratch((batch, splits, 2), torch.int32, device)
            _split_residual_kernel[(batch, splits)](
                *outputs, residual_f, residual_i, arrivals, stats_f, stats_i, *inputs, conditional_rates,
                vocab, num_slots, splits, chunk, BLOCK=block, num_warps=num_warps, **sizes, **common,
            )
        return VerifyResult(out, num_emitted, num_accepted)
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


@_quiet_under_interpreter
def simulate(*, conditional_rates: torch.Tensor, num_requests: int, seed: int, first_request: int) -> torch.Tensor:
    """Drafts accepted per synthetic step; request ``r`` has seed ``request_seed(seed, first_request + r)``.

    ``conditional_rates`` ``[K]`` float32; returns ``[num_requests]`` int32.
    """
    counts = torch.empty(num_requests, dtype=torch.int32, device=conditional_rates.device)
    grid = (triton.cdiv(num_requests, _SIMULATE_BLOCK),)
    _simulate_kernel[grid](
        counts, conditional_rates, seed, first_request, num_requests, conditional_rates.numel(),
        BLOCK=_SIMULATE_BLOCK,
    )
    return counts
