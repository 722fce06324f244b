"""The Triton backend: launchers with the same signatures as ``specbench/reference.py``.

Inputs arrive checked and normalised by ``specbench.verification.verify``. The launcher picks the
kernels (``specbench/kernels/sequential.py`` and ``specbench/kernels/split.py``):

- requests decided by values at their drafts alone (the synthetic mode; target probabilities with
  one-hot drafts or draft probabilities) read only their terminal row: one launch of the split
  terminal kernel at every batch size;
- the others (greedy rows; the probabilistic mode with target logits or draft logits) read their
  rows in order: one program per request that stops at the first rejection when the batch fills
  the GPU, the vocabulary split across programs (row statistics, then the terminal race) when it
  does not.

Every path gives the same tokens for the same seeds.

Truncation and log-probabilities (``specbench/kernels/truncation.py``, ``specbench/kernels/logprobs.py``):

- With every knob None (``top_k``, ``top_p``, ``min_p``), the kernels above run exactly as without
  them: same kernels, same constexprs; nothing of truncation is compiled into them.
- With any knob given, for every target and draft form: the summaries of the rows a step needs
  (``(m, S, tau, iota)``: the row max, the kept mass, the cutoff in the row's order, no sort) are
  written first to the step's scratch, by the prepass (grid ``B x (K + 1) x sides * slices``; a batch
  given ``top_k`` that splits) or by the split histogram path's six launches (a batch given no ``top_k``;
  the launch variants ``triton-radix-...``: the split radix path's ten), or found by the step itself as it
  reaches them (``FUSED``: a batch given ``top_k`` too large to split); then one program per request
  (``_verify_truncated_kernel``) verifies the batch, and in a batch given no ``top_k`` (on a GPU unless
  ``strategy("sequential")``, elsewhere where it splits) it leaves each race over a whole row to one more
  launch split across programs (``_truncated_terminal_kernel``, ``DEFER``). Within that call
  a request with every knob off, and a greedy one, is decided by today's arithmetic (the helpers
  ``sequential.py`` uses, bit for bit); a truncated one from its summaries. ``TRUNCATE_DRAFT``: draft
  logits are truncated too (``truncate_draft_logits``); draft probabilities never are.
- ``logprobs``: one more launch after the step (grid ``B x (K + 1)``), reading the step's tokens and,
  for truncated requests, the summaries still in the scratch.

Methods (``method``, ``specbench/methods.py``): ``token`` is everything above. ``block`` in the
probabilistic mode, untruncated, is one launch of ``specbench/kernels/block.py`` (one program per
request, at ``ROW_PROGRAM_SHAPE``), or its split path (three launches: the rows' statistics, the
residual masses, the final race, each split across programs), which ``auto`` takes on a GPU (faster in
22 of 24 H200 rows, results/h200-split-paths/) and ``strategy("split")`` forces. The lossy
methods and a truncated ``block`` call are refused with one sentence. Greedy calls run the greedy rule
whatever the method.

Trees (``tree_parents``, "Trees" in ``specbench/verification.py``; ``specbench/kernels/tree.py``): one
launch, one program per request walking its tree, at the chain's one-program shape, or the split path
(greedy and probabilistic): every row's statistics split across programs and the walk in each request's
last program; then, in the probabilistic mode, one more launch for the masses after a first rejected
child that the walk stopped for (summed across programs, the walk resumed) and the final race split.
Where a place's second child is its last, the pass for the mass after the first keeps the candidates of the
race after both (tree.py, ``CANDIDATE_MARGIN``): one program per request carries ``CAND_GROUPS`` of them
through its walk, and the split path keeps them from ``TREE_CANDIDATES_MIN_BATCH`` requests (``CANDIDATES``).
``auto`` takes the split path on a GPU up to ``TREE_SPLIT_MAX_BATCH`` requests;
``strategy("split")`` forces it. Truncation, logprobs and other methods are refused before here.

No launch reads a value on the host, and scratch comes from ``_scratch``: a step can be captured
in a CUDA graph. Scratch buffers and arrival counters are kept per (device, stream, *scratch set*);
``scratch_set(j)`` makes the launches inside a ``with`` block take set ``j`` (0 otherwise), so a timer
that places a case's inputs at several addresses can place its scratch with them (``bench.py``).

The truncation launches take their shapes from ``TRUNCATION_SHAPES``, by path (the prepass, or the fused step,
whose registers ``_register_cap`` caps); the log-probability epilogue and block's one-program path
``ROW_PROGRAM_SHAPE``; a launch variant's ``TUNING`` overrides both (and launches the fused step uncapped).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import numpy as np
import torch
import triton
import triton.language as tl

from specbench.errors import SpecbenchError
from specbench.kernels import bracket_race, draft_bounds, histogram, radix, truncation
from specbench.kernels.block import _block_masses_kernel, _block_race_kernel, _block_rows_kernel, _verify_block_kernel
from specbench.kernels.cutoffs import MAX_GROUPS
from specbench.kernels.logprobs import _logprobs_kernel
from specbench.kernels.sequential import _verify_sequential_kernel
from specbench.kernels.split import _split_rows_kernel, _split_terminal_kernel
from specbench.kernels.synthetic import _simulate_kernel, _simulate_mixture_kernel
from specbench.kernels.tree import CAND_LANE, _tree_finish_kernel, _tree_rows_kernel, _verify_tree_kernel
from specbench.kernels.truncation import (
    _truncated_terminal_kernel,
    _truncation_prepass_kernel,
    _verify_truncated_kernel,
)
from specbench.verification import VerifyResult

# Under TRITON_INTERPRET=1 the kernels run as numpy: lanes the kernels mask or select away may
# compute -inf - -inf or overflow, which numpy would report as warnings. On a GPU those lanes are
# free; a guard per token there would cost instructions in loops bound by instruction issue.
INTERPRETED = not isinstance(_verify_sequential_kernel, triton.runtime.JITFunction)
_Fn = TypeVar("_Fn", bound=Callable)


def _quiet_under_interpreter(launcher: _Fn) -> _Fn:
    if not INTERPRETED:
        return launcher  # nothing to silence, and no extra call on the launch path

    @functools.wraps(launcher)
    def wrapper(**kwargs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore", under="ignore"):
            return launcher(**kwargs)

    return wrapper  # type: ignore[return-value]


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _next_power_of_2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


def _argument_classes(args: tuple) -> tuple:
    # what Triton specialises a launch on: a tensor's dtype and 16-byte alignment, an integer's
    # width and whether it is 1 or a multiple of 16 (a finer key than Triton's own is safe)
    return tuple((a.dtype, a.data_ptr() & 15) if isinstance(a, torch.Tensor) else (a == 1, a & 15, a >> 31)
                 for a in args)


class _Launcher:
    """Launches one Triton kernel, the first time through Triton's JIT (which compiles it and
    returns the compiled kernel), after that straight through the compiled kernel.

    Triton binds and specialises every argument and re-checks the kernel's global constants on
    each launch: about 40 µs of Python per launch here, more than the GPU work of a small batch.
    The compiled kernel is kept per specialisation (``_argument_classes`` of the arguments, the
    constexprs, the warps, the device) and called with all arguments in signature order, as
    Triton's own launch does. Should a Triton version refuse that call, every later launch takes
    the JIT path. A launch may cap the registers a thread takes (``max_registers``, Triton's ``maxnreg``:
    part of that key too). A constexpr the call leaves out takes its default from the kernel's signature (so the
    launch is still kept), and a launch given ``PDL`` true (``dependent_launch.py``) is compiled and launched with
    Triton's ``launch_pdl``.
    """

    direct = True
    failure = ""  # why the direct path was given up, if it was

    def __init__(self, kernel) -> None:
        self.kernel = kernel
        self.compiled: dict[tuple, object] = {}
        parameters = inspect.signature(kernel.fn).parameters.values()
        self.constexpr_names = [p.name for p in parameters if p.annotation is tl.constexpr]
        self.constexpr_defaults = {p.name: p.default for p in parameters
                                   if p.annotation is tl.constexpr and p.default is not inspect.Parameter.empty}

    def __call__(self, grid: tuple[int, ...], args: tuple, num_warps: int, stream: tuple[str, int, int, int],
                 max_registers: int | None = None, **constexprs: object) -> None:
        """Launch on ``grid`` with ``args`` (every non-constexpr argument, in order) on ``stream``
        (``_stream_key``: device type and index, the CUDA stream handle, the scratch set); ``max_registers``:
        a cap on the registers a thread takes (Triton's ``maxnreg``; the interpreter has none)."""
        constexprs = {**self.constexpr_defaults, **constexprs}
        if INTERPRETED:
            self.kernel[grid](*args, num_warps=num_warps, **constexprs)
            return
        options = {"num_warps": num_warps} if max_registers is None else {"num_warps": num_warps,
                                                                          "maxnreg": max_registers}
        if constexprs.get("PDL"):
            options["launch_pdl"] = True
        if not _Launcher.direct:
            self.kernel[grid](*args, **options, **constexprs)
            return
        key = (num_warps, max_registers, stream[1], *(constexprs.get(name) for name in self.constexpr_names),
               *_argument_classes(args))
        compiled = self.compiled.get(key)
        if compiled is not None:
            try:
                # the compiled kernel's launcher reads three grid sizes, as Triton's own launch passes them
                compiled[(*grid, 1, 1)[:3]](*args, *(constexprs[name] for name in self.constexpr_names),
                                            stream=stream[2])
                return
            except Exception as exc:  # noqa: BLE001 -- a Triton without this entry point: use the JIT from now on
                _Launcher.direct = False
                _Launcher.failure = f"{self.kernel.fn.__name__}: {type(exc).__name__}: {exc}"
        compiled = self.kernel[grid](*args, **options, **constexprs)
        if compiled is not None and len(self.constexpr_names) == len(constexprs) and hasattr(compiled, "__getitem__"):
            self.compiled[key] = compiled


_MODE_IDS = {"greedy": 0, "probabilistic": 1, "synthetic": 2}
_SIMULATE_BLOCK = 1024
STRATEGIES = ("auto", "sequential", "split")
_strategy = "auto"
# Launch shapes (tokens per block, warps per program), from H200 measurements (results/kernels-notes.md).
# One program per request: the probabilistic mode 8192 x 32 (the fused statistics loop keeps one
# (max, sum) per thread and 4-token tile, so 8 tokens per thread and row fit in flight in 64
# registers; its races take half the block, 4096, and do not spill; B=256 K=7 draft logits all
# accepted 618.0 against 629.1 µs at 4096 x 32, results/h200-session5-variants/); greedy rows take
# as many warps as keep about 4096 warps in flight, 8 tokens per thread (B = 128: 8192 x 32; 256:
# 4096 x 16; 512: 2048 x 8). The split kernels: greedy 2048 x 8, the others 1024 x 4, 512 x 4 at
# B <= 16 (shorter programs: a small batch is bound by latency) and at B >= 256 (below), each
# program reading at most SPLIT_CHUNK tokens of a row and the grid holding about
# SPLIT_PROGRAMS_PER_SM programs per multiprocessor. TUNING overrides them when set (benchmarks use
# it to explore).
SEQUENTIAL_PROBABILISTIC_SHAPE = (8192, 32)
SEQUENTIAL_GREEDY_WARPS_IN_FLIGHT = 4096
SPLIT_SHAPE = {"greedy": (2048, 8), "probabilistic": (1024, 4), "synthetic": (1024, 4)}
SPLIT_SMALL_BATCH = 16  # at most this many requests: the other modes' split programs read 512 x 4
# ... and at least this many: there the split programs are races bound by instruction issue (requests
# decided at their drafts), and 512 x 4 holds 48 registers against 96 (B=512 K=7 V=128256, target and
# draft probabilities, all accepted, graph: 107.6 against 121.3 µs; B=64 is faster at 1024 x 4)
SPLIT_LARGE_BATCH = 256
SPLIT_CHUNK = 16384
SPLIT_PROGRAMS_PER_SM = 4
TUNING: dict[str, int | None] = {"block": None, "num_warps": None, "split_chunk": None, "radix_slice": None,
                                 "radix_block": None, "radix_warps": None, "radix_prefetch": None,
                                 "split_search": None, "histogram_slice": None, "histogram_block": None,
                                 "histogram_warps": None, "histogram_bins": None,
                                 "histogram_decide": None, "bounds_slice": None, "bounds_block": None,
                                 "bounds_warps": None, "bounds_rounds": None, "histogram_atomic": None,
                                 "histogram_slices_per_program": None, "histogram_rows": None,
                                 "histogram_after_slices": None,
                                 "histogram_levels": None, "histogram_bounds_max": None, "histogram_ftz_sums": None,
                                 "histogram_predicated_sums": None, "histogram_race": None, "tree_finish_slices": None,
                                 "tree_race_candidates": None, "decision_fold": None, "dependent_launch": None}


def _tuned(name: str, default: bool) -> bool:
    # a launch variant's on / off setting (TUNING[name], 0 or 1), else the launcher's `default`
    forced = TUNING[name]
    return default if forced is None else bool(forced)


@contextlib.contextmanager
def strategy(name: str) -> Iterator[None]:
    """Force the kernel shape (``sequential`` or ``split``) inside a ``with`` block; for tests and timing.

    Requests decided at their drafts alone always take the split terminal kernel.
    """
    global _strategy
    if name not in STRATEGIES:
        raise SpecbenchError(f"strategy must be one of {', '.join(STRATEGIES)}, got {name!r}")
    previous, _strategy = _strategy, name
    try:
        yield
    finally:
        _strategy = previous


@functools.cache
def _compute_capability(device_index: int) -> tuple[int, int]:
    return torch.cuda.get_device_capability(device_index)


@functools.cache
def _num_sms(device_index: int) -> int:
    return torch.cuda.get_device_properties(device_index).multi_processor_count


def _slices(programs_per_split: int, vocab: int, block: int, device: torch.device) -> tuple[int, int]:
    """(slices per row, tokens per slice): enough slices that the grid gives every multiprocessor a
    few programs, and that no program reads more than ``SPLIT_CHUNK`` tokens of a row; a slice is
    whole blocks, so only the last one ends short."""
    blocks = _cdiv(vocab, block)
    if device.type != "cuda":
        wanted = min(3, blocks)  # the interpreter: a few slices exercise the merge
    else:
        wanted = max(_cdiv(SPLIT_PROGRAMS_PER_SM * _num_sms(device.index or 0), programs_per_split),
                     _cdiv(vocab, TUNING["split_chunk"] or SPLIT_CHUNK))
        wanted = max(1, min(wanted, blocks, 256))
    chunk = _cdiv(_cdiv(vocab, wanted), block) * block
    return _cdiv(vocab, chunk), chunk


# Which path wins, from `specbench kernels --impl triton-sequential,triton-split` on an H200 across
# B = 64..512, K = 4 and 7, V = 151936, L = 3 and all accepted (results/h200-launch-rule/README.md): the
# split reads every row a request might need, one program per request stops at the first
# rejection but leaves multiprocessors idle at small batch. Greedy rows split while B x (K + 1)
# rows are at most 2.5 per multiprocessor (B = 64 K = 4 splits, B = 64 K = 7 and B = 96 K = 4 do
# not); the probabilistic mode, whose split pays a second launch but reads two rows per slot in
# parallel, while B is at most half the multiprocessors (B = 64 splits at K = 4 and 7, B = 96 not).
SPLIT_ROWS_PER_SM = {"greedy": 2.5}
SPLIT_REQUESTS_PER_SM = 0.5
# Trees split up to this batch: a 2x2 tree of Llama 3 rows on an H200 (graph, results/h200-split-paths/README.md,
# the split path in three launches then) took 23.5 / 58.8 µs split against 85.3 / 89.7 in one program per request
# at B = 1 / 8 with its first children accepted, 25.1 / 68.7 against 146.1 / 166.3 with them rejected; at B = 64
# one program was faster (107.9 against 213.1 accepted) or level (244.0 against 245.7 rejected). In two launches
# (results/h200-tree-launches/, tests/gpu_tree_timing.py) the split path takes 18.6 / 32.7 and 27.8 / 52.2 at
# B = 1 / 8.
TREE_SPLIT_MAX_BATCH = 8
# One program per request keeps a candidate per group of its lanes (of CAND_LANE tokens a chunk) for the race after a
# place's two rejected children (kernels/tree.py, CANDIDATE_MARGIN), carried through the walk in these many at most.
TREE_CANDIDATE_GROUPS = 256
# The split path keeps them from this batch on (a constexpr: compiled in). With the finish kernel at the slices
# _slices gives (251 of one chunk at B = 1 over Llama 3 rows), the race from its 502 candidates took longer at B = 1
# than the race's own split pass (28.3 against 26.5 µs, results/h200-tree-candidates/); at 128 slices it does not
# (26.0 against 26.5), so candidates are kept at every batch (results/h200-tree-finish-variants/).
TREE_CANDIDATES_MIN_BATCH = 1
# The split path's finish kernel takes at most these many slices of a row a request (several chunks a program where
# _slices gives more): timed at 32, 64 and 128 beside _slices' own (H200, 2x2 tree, Llama 3 rows, graph), 128 with
# candidates was never slower than 0.2% and 2%-7% faster at B = 1 and 2 (results/h200-tree-finish-variants/).
TREE_FINISH_MAX_SLICES = 128


def _use_split(batch: int, num_slots: int, mode: str, device: torch.device) -> bool:
    if _strategy != "auto":
        return _strategy == "split"
    if device.type != "cuda":
        return False
    num_sms = _num_sms(device.index or 0)
    if mode in SPLIT_ROWS_PER_SM:
        return batch * num_slots <= SPLIT_ROWS_PER_SM[mode] * num_sms
    return batch <= SPLIT_REQUESTS_PER_SM * num_sms


_arrivals: dict[tuple[str, int, int, int], torch.Tensor] = {}
_scratch_cache: dict[tuple[str, int, int, int, torch.dtype], torch.Tensor] = {}
_scratch_set = 0
# Scratch buffers and counters that a larger one replaced, kept allocated: a CUDA graph captured with
# them still reads and writes them when replayed (a timer replays the graphs of several launch
# variants whose scratch sizes differ). Each replacement at least doubles, so these hold less than
# the buffers in use.
_retired: list[torch.Tensor] = []


@contextlib.contextmanager
def scratch_set(index: int) -> Iterator[None]:
    """Launches inside a ``with`` block take scratch set ``index`` (module docstring): their own
    scratch buffers and arrival counters, apart from every other set's. For timers (``bench.py``'s
    placements); results never depend on the set."""
    global _scratch_set
    previous, _scratch_set = _scratch_set, index
    try:
        yield
    finally:
        _scratch_set = previous


def _stream_key(device: torch.device) -> tuple[str, int, int, int]:
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    return device.type, device.index or 0, stream, _scratch_set


def _arrival_counters(batch: int, device: torch.device, key: tuple[str, int, int, int]) -> torch.Tensor:
    """At least ``batch`` int32 counters of the split kernels: per-request arrivals, and a kernel's other
    counters after them (block's passed rows and rows' arrivals, the tree's tickets); zero on entry, left at zero
    on exit.

    Kept per (device, stream, scratch set), so launches that may run at the same time never share one.
    """
    counters = _arrivals.get(key)
    if counters is None or counters.numel() < batch:
        if counters is not None:
            _retired.append(counters)
        counters = torch.zeros(max(batch, 64, 2 * (0 if counters is None else counters.numel())), dtype=torch.int32,
                               device=device)
        _arrivals[key] = counters
    return counters


def _alloc_scratch(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    # the kernels read only scratch slots an earlier kernel of the same step wrote (tests poison this)
    return torch.empty(shape, dtype=dtype, device=device)


def _scratch(numel: int, dtype: torch.dtype, device: torch.device, key: tuple[str, int, int, int]) -> torch.Tensor:
    """A scratch buffer of at least ``numel`` elements, kept per (device, stream, scratch set, dtype) and
    grown as needed (at least doubled; the one replaced stays allocated, ``_retired``): launches on one
    stream run in order, so one step's scratch is free when the next starts."""
    cache_key = (*key, dtype)
    buffer = _scratch_cache.get(cache_key)
    if buffer is None or buffer.numel() < numel:
        if buffer is not None:
            _retired.append(buffer)
        buffer = _alloc_scratch((max(numel, 1024, 2 * (0 if buffer is None else buffer.numel())),), dtype, device)
        _scratch_cache[cache_key] = buffer
    return buffer


def _draft_kind(draft_logits: torch.Tensor | None, draft_probs: torch.Tensor | None) -> int:
    if draft_logits is not None:
        return 1
    if draft_probs is not None:
        return 2
    return 0


def _launch_shape(vocab: int, device: torch.device, split: bool, mode: str, batch: int) -> tuple[int, int]:
    """(tokens per block, warps per program) of the kernel the launcher picked (the shapes above)."""
    if device.type != "cuda":
        # the interpreter runs a block as numpy arrays: small blocks for small rows (at least 16
        # tokens: the softmax statistics read 4-token tiles)
        return min(max(_next_power_of_2(vocab), 16), 1024), 4
    if split:
        block, num_warps = SPLIT_SHAPE[mode]
        if mode != "greedy" and (batch <= SPLIT_SMALL_BATCH or batch >= SPLIT_LARGE_BATCH):
            block = 512
    elif mode == "greedy":
        num_warps = min(max(_next_power_of_2(SEQUENTIAL_GREEDY_WARPS_IN_FLIGHT // max(batch, 1)), 8), 32)
        block = 256 * num_warps
    else:
        block, num_warps = SEQUENTIAL_PROBABILISTIC_SHAPE
    block = min(block, max(_next_power_of_2(vocab), 128))
    num_warps = min(num_warps, max(block // 128, 1))  # at least 4 tokens per thread
    return TUNING["block"] or block, TUNING["num_warps"] or num_warps


def screened(batch: int, device: torch.device) -> bool:
    """Whether the split terminal kernel screens its races (``specbench/kernels/rows.py``): not at
    small batch, where a race is a few chunks per program and bound by latency, so the screen's
    reduction per chunk costs more than the work it skips (B=8 K=3 under a graph, H200: one-hot
    drafts 17.4 screened against 15.8 µs). The one-program path always screens."""
    return batch > SPLIT_SMALL_BATCH or device.type != "cuda"


def decided_at_drafts(mode: str, target_is_probs: bool, draft_kind: int) -> bool:
    """Whether a request's decision needs only values at its drafts (no row statistics): the
    synthetic mode, and target probabilities with one-hot drafts or draft probabilities."""
    return mode == "synthetic" or (mode == "probabilistic" and target_is_probs and draft_kind != 1)


@_quiet_under_interpreter
def verify(
    *,
    mode: str,
    target_logits: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
    min_p: torch.Tensor | None = None,
    truncate_draft_logits: bool = True,
    logprobs: str | None = None,
    method: str = "token",
    tree_parents: torch.Tensor | None = None,
    tree_candidates: str = "independent",
) -> VerifyResult:
    """Triton verification step; see ``specbench.verification.verify`` for arguments and results."""
    if tree_parents is not None:  # verify refuses truncation, logprobs and other methods with a tree
        return _verify_tree(mode=mode, target_logits=target_logits, target_probs=target_probs,
                            draft_token_ids=draft_token_ids, num_draft_tokens=num_draft_tokens,
                            draft_logits=draft_logits, draft_probs=draft_probs, temperatures=temperatures, seeds=seeds,
                            positions=positions, conditional_rates=conditional_rates, tree_parents=tree_parents,
                            tree_candidates=tree_candidates)
    truncated = top_k is not None or top_p is not None or min_p is not None
    if method != "token" and mode == "probabilistic":  # greedy rows have one rule whatever the method
        if method != "block":
            raise SpecbenchError(f"the triton backend has no kernel for the {method} method yet; use "
                                 f"backend='torch' (--impl torch), which runs it on CPU and CUDA")
        if truncated:
            raise SpecbenchError("the triton block kernel does not take truncation (top_k, top_p, min_p) yet; use "
                                 "backend='torch' (--impl torch) for block verification of a truncated call")
        result = _verify_block(target_logits=target_logits, target_probs=target_probs,
                               draft_token_ids=draft_token_ids, num_draft_tokens=num_draft_tokens,
                               draft_logits=draft_logits, draft_probs=draft_probs, temperatures=temperatures,
                               seeds=seeds, positions=positions)
    elif truncated:
        result = _verify_truncated(mode=mode, target_logits=target_logits, target_probs=target_probs,
                                   draft_token_ids=draft_token_ids, num_draft_tokens=num_draft_tokens,
                                   draft_logits=draft_logits, draft_probs=draft_probs, temperatures=temperatures,
                                   seeds=seeds, positions=positions, conditional_rates=conditional_rates,
                                   top_k=top_k, top_p=top_p, min_p=min_p,
                                   truncate_draft_logits=truncate_draft_logits, logprobs=logprobs is not None)
    else:
        result = _verify_untruncated(mode=mode, target_logits=target_logits, target_probs=target_probs,
                                     draft_token_ids=draft_token_ids, num_draft_tokens=num_draft_tokens,
                                     draft_logits=draft_logits, draft_probs=draft_probs, temperatures=temperatures,
                                     seeds=seeds, positions=positions, conditional_rates=conditional_rates)
    if logprobs is None:
        return result
    return result._replace(logprobs=_logprobs(result, mode=mode, target_logits=target_logits,
                                              target_probs=target_probs, num_draft_tokens=num_draft_tokens,
                                              temperatures=temperatures, seeds=seeds, positions=positions,
                                              top_k=top_k, top_p=top_p, min_p=min_p, raw=logprobs == "raw"))


# Block's masses kernel skips rows below a passed stop test from this many requests: there its grid runs in several
# waves, so a row's programs, ordered row by row from the last, start after the rows above them were read. H200,
# graph, µs, block from target and draft probabilities against the kernels before (results/h200-block-decide/):
# L = 3 at 256 x 7 Qwen3 222.9 against 257.9 and at 512 x 7 Llama 3 328.6 against 415.2; from logits 772.8 / 779.2
# and 1,236.9 / 1,279.1 at L = 3, 759.6 / 744.9 at 256 x 7 on natural inputs. At B = 64 (a wave and a half) the
# row-by-row order cost more than the skip saved (logits, L = 3: 183.2 / 166.1 with both, 186.0 / 165.0 with the
# order alone; 168.8 / 165.1 with neither), as at B <= 8.
BLOCK_SKIP_MIN_BATCH = 256


def _verify_block(*, target_logits, target_probs, draft_token_ids, num_draft_tokens, draft_logits, draft_probs,
                  temperatures, seeds, positions) -> VerifyResult:
    # block verification, untruncated (specbench/kernels/block.py): on a GPU the split path (rows, residual
    # masses and the final race each split across programs; the rows kernel one program per request where no weight
    # needs statistics); one program per request under strategy("sequential") and on the CPU. The split path was
    # faster in 22 of the 24 graph rows measured on an H200 (B x K = 64 x 4, 256 x 7 Qwen3, 512 x 7 Llama 3; draft
    # and target logits and probabilities; L = 3 and all accepted; results/h200-split-paths/README.md), up to 7x at
    # B = 64; slower only at 512 x 7 with target and draft probabilities all accepted (175.9 against 145.2 µs) and
    # level at 512 x 7 logits all accepted.
    step = _Step.of(target_logits, target_probs, draft_logits, draft_probs, draft_token_ids)
    target, draft, draft_ids = step.target, step.draft, step.draft_ids
    batch, num_slots, vocab = target.shape
    out, num_emitted, num_accepted = step.result[:3]
    if batch == 0:
        return step.result
    device = target.device
    key = _stream_key(device)
    rows = (target, target.stride(0), target.stride(1), draft, draft.stride(0), draft.stride(1), draft_ids,
            draft_ids.stride(0), num_draft_tokens, temperatures, seeds, positions)
    forms = {"DRAFT": step.draft_kind, "TARGET_PROBS": step.target_is_probs}
    out_block = _next_power_of_2(num_slots)
    if _strategy == "sequential" or (_strategy == "auto" and device.type != "cuda"):
        block, num_warps = _program_shape(vocab, device, *ROW_PROGRAM_SHAPE)
        _BLOCK((batch,), (out, out.stride(0), num_emitted, num_accepted, *rows, vocab, num_slots), num_warps, key,
               BLOCK=block, OUT_BLOCK=out_block, **forms)
        return step.result
    block, num_warps = _launch_shape(vocab, device, True, "probabilistic", batch)
    row_splits, row_chunk = _slices(batch * num_slots, vocab, block, device)
    race_splits, race_chunk = _slices(batch, vocab, block, device)
    scratch_f = _scratch(batch * (num_slots * row_splits * 5 + race_splits * 2 + 5 * out_block), torch.float32,
                         device, key)
    scratch_i = _scratch(batch * (num_slots * row_splits + race_splits * 2 + 3), torch.int32, device, key)
    counters = _arrival_counters(batch * (2 + num_slots), device, key)
    sizes = {"BLOCK": block, "OUT_BLOCK": out_block, "S_BLOCK": _next_power_of_2(max(row_splits, race_splits)), **forms}
    outputs = (out, out.stride(0), num_emitted, num_accepted)
    args = (scratch_f, scratch_i, counters, *outputs, *rows, vocab, num_slots, row_splits, race_splits, row_chunk)
    # without row statistics to gather (target probabilities with draft probabilities or one-hot drafts) the rows
    # kernel is one program per request, and the masses kernel takes a greedy request's argmax
    stats = not decided_at_drafts("probabilistic", step.target_is_probs, step.draft_kind)
    _BLOCK_ROWS((batch, num_slots, row_splits) if stats else (batch,), args, num_warps, key, STATS=stats, **sizes)
    # from BLOCK_SKIP_MIN_BATCH requests the masses kernel's programs run row by row from the last (block.py): a row's
    # programs start after the rows above it were read, and skip it below a passed test (SKIP)
    skip = batch >= BLOCK_SKIP_MIN_BATCH
    _BLOCK_MASSES((batch * num_slots * row_splits,) if skip else (batch, num_slots, row_splits), args, num_warps, key,
                  SKIP=skip, **sizes)
    _BLOCK_RACE((batch, race_splits),
                (scratch_f, scratch_i, counters, out, out.stride(0), num_emitted, *rows, vocab, num_slots, row_splits,
                 race_splits, race_chunk),
                num_warps, key, SCREEN=screened(batch, device), **sizes)
    return step.result


def _verify_tree(*, mode, target_logits, target_probs, draft_token_ids, num_draft_tokens, draft_logits, draft_probs,
                 temperatures, seeds, positions, conditional_rates, tree_parents, tree_candidates) -> VerifyResult:
    # a tree step (specbench/kernels/tree.py): one program per request walks its tree, at the chain's
    # one-program launch shape; or (greedy and probabilistic; the synthetic mode always walks in one program)
    # the split path: the rows' statistics split across programs and the walk in each request's last program,
    # then in the probabilistic mode the masses the walk stopped for and the final race, split again. "auto"
    # splits on a GPU while B <= TREE_SPLIT_MAX_BATCH.
    step = _Step.of(target_logits, target_probs, draft_logits, draft_probs, draft_token_ids)
    target, draft, draft_ids = step.target, step.draft, step.draft_ids
    batch, num_slots, vocab = target.shape
    num_nodes = num_slots - 1
    device = target.device
    out, num_emitted, num_accepted = step.result[:3]
    nodes = torch.empty((batch, num_nodes), dtype=torch.int32, device=device)
    result = step.result._replace(accepted_nodes=nodes)
    if batch == 0:
        return result
    # no nodes: a -1 column stands in for the parents (never read), as _Step does for the draft ids
    parents = tree_parents if num_nodes else torch.full((batch, 1), -1, dtype=torch.int64, device=device)
    table = conditional_rates
    key = _stream_key(device)
    node_block = _next_power_of_2(max(num_nodes, 1))
    common = {"MODE": _MODE_IDS[mode], "DRAFT": step.draft_kind, "TARGET_PROBS": step.target_is_probs,
              "WITHOUT_REPLACEMENT": tree_candidates == "without_replacement", "NODE_BLOCK": node_block}
    rows = (target, target.stride(0), target.stride(1), draft, draft.stride(0), draft.stride(1))
    outputs = (out, out.stride(0), nodes, max(nodes.stride(0), 1), num_emitted, num_accepted)
    requests = (num_draft_tokens, temperatures, seeds, positions)
    split = _strategy == "split" or (_strategy == "auto" and device.type == "cuda" and batch <= TREE_SPLIT_MAX_BATCH)
    if not split or mode == "synthetic":
        block, num_warps = _launch_shape(vocab, device, False, mode, batch)
        _TREE((batch,), (*outputs, *rows, draft_ids, draft_ids.stride(0), parents, parents.stride(0), *requests,
                         table, table.shape[0], table.shape[1], vocab, num_nodes),
              num_warps, key, BLOCK=block, CAND_GROUPS=min(block // CAND_LANE.value, TREE_CANDIDATE_GROUPS), **common)
        return result
    block, num_warps = _launch_shape(vocab, device, True, mode, batch)
    row_splits, row_chunk = _slices(batch * num_slots, vocab, block, device)
    race_splits, race_chunk = _slices(batch, vocab, block, device)
    max_slices = TUNING["tree_finish_slices"] or TREE_FINISH_MAX_SLICES  # (a launch variant's, or the launcher's)
    if race_splits > max_slices:  # whole blocks a slice, as _slices makes them
        race_chunk = _cdiv(_cdiv(vocab, max_slices), block) * block
        race_splits = _cdiv(vocab, race_chunk)
    row_block = _next_power_of_2(num_slots)
    scratch_f = _scratch(batch * (num_slots * row_splits * 4 + row_block * race_splits + race_splits * 2 + 2
                                  + 4 * node_block + 4 * row_block + race_splits * 4 + 1), torch.float32, device, key)
    scratch_i = _scratch(batch * (num_slots * row_splits + race_splits * 2 + 5 + 4 * node_block + 2 * row_block),
                         torch.int32, device, key)
    counters = _arrival_counters(3 * batch, device, key)
    args = (scratch_f, scratch_i, counters, *outputs, *rows, draft_ids, draft_ids.stride(0), parents,
            parents.stride(0), *requests, vocab, num_nodes, row_splits, race_splits)
    sizes = {"BLOCK": block, "ROW_BLOCK": row_block, "S_BLOCK": _next_power_of_2(max(row_splits, race_splits)),
             **common}
    # the rows' statistics and the walk (to the end in the greedy mode); then the masses the walk stopped for, the
    # walk's end and the final race (tree.py)
    _TREE_ROWS((batch, num_slots, row_splits), (*args, row_chunk), num_warps, key, **sizes)
    if mode != "greedy":
        _TREE_FINISH((2 * batch * race_splits,), (*args, race_chunk), num_warps, key,
                     CANDIDATES=_tuned("tree_race_candidates", batch >= TREE_CANDIDATES_MIN_BATCH), **sizes)
    return result


class _Step(NamedTuple):
    """What both launch paths set up first: the target rows, the draft rows (the target when there
    are none: never read with DRAFT == 0), the draft ids (one -1 column when K = 0) and the outputs."""

    target: torch.Tensor
    target_is_probs: bool
    draft: torch.Tensor
    draft_kind: int
    draft_ids: torch.Tensor
    result: VerifyResult

    @classmethod
    def of(cls, target_logits, target_probs, draft_logits, draft_probs, draft_token_ids) -> _Step:
        target = target_logits if target_probs is None else target_probs
        batch, num_slots, _ = target.shape
        device = target.device
        out = torch.empty((batch, num_slots), dtype=torch.int64, device=device)
        num_emitted, num_accepted = torch.empty((2, batch), dtype=torch.int32, device=device).unbind(0)
        draft = draft_logits if draft_logits is not None else draft_probs
        draft_ids = draft_token_ids if draft_token_ids.numel() else torch.full((batch, 1), -1, dtype=torch.int64,
                                                                               device=device)
        return cls(target, target_probs is not None, target if draft is None else draft,
                   _draft_kind(draft_logits, draft_probs), draft_ids, VerifyResult(out, num_emitted, num_accepted))


def _verify_untruncated(
    *,
    mode: str,
    target_logits: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
) -> VerifyResult:
    # the step with no truncation: today's kernels, unchanged
    step = _Step.of(target_logits, target_probs, draft_logits, draft_probs, draft_token_ids)
    target, target_is_probs, draft, draft_kind, draft_ids = (step.target, step.target_is_probs, step.draft,
                                                             step.draft_kind, step.draft_ids)
    batch, num_slots, vocab = target.shape
    device = target.device
    out, num_emitted, num_accepted = step.result[:3]
    if batch == 0:
        return step.result
    common = {"MODE": _MODE_IDS[mode], "DRAFT": draft_kind, "TARGET_PROBS": target_is_probs}
    outputs = (out, out.stride(0), num_emitted, num_accepted)
    rows = (
        target, target.stride(0), target.stride(1),
        draft, draft.stride(0), draft.stride(1),
        draft_ids, draft_ids.stride(0),
        num_draft_tokens, temperatures, seeds, positions,
    )
    inline = decided_at_drafts(mode, target_is_probs, draft_kind)
    split = inline or _use_split(batch, num_slots, mode, device)
    block, num_warps = _launch_shape(vocab, device, split, mode, batch)
    out_block = _next_power_of_2(num_slots)
    key = _stream_key(device)
    if not split:
        _SEQUENTIAL((batch,), (*outputs, *rows, vocab, num_slots), num_warps, key, BLOCK=block, OUT_BLOCK=out_block,
                    SCREEN=True, **common)
        return VerifyResult(out, num_emitted, num_accepted)

    arrivals = _arrival_counters(batch, device, key)
    race_splits, race_chunk = _slices(batch, vocab, block, device)
    # decided inline, the greedy rows of a probabilistic batch are read on the race's grid
    row_splits, row_chunk = (race_splits, race_chunk) if inline else _slices(batch * num_slots, vocab, block, device)
    per_request = num_slots * row_splits
    scratch_f = _scratch(batch * (per_request * 4 + race_splits * 2 + 4), torch.float32, device, key)
    scratch_i = _scratch(batch * (per_request + race_splits * 2 + 4), torch.int32, device, key)
    sizes = {"S_BLOCK": _next_power_of_2(max(row_splits, race_splits)), "OUT_BLOCK": out_block}
    if not inline:
        _ROWS((batch, num_slots, row_splits),
              (scratch_f, scratch_i, arrivals, *outputs, *rows, vocab, num_slots, row_splits, race_splits, row_chunk),
              num_warps, key, BLOCK=block, **sizes, **common)
    if mode != "greedy":
        _TERMINAL((batch, race_splits),
                  (scratch_f, scratch_i, arrivals, *outputs, *rows, conditional_rates, vocab, num_slots, row_splits,
                   race_splits, race_chunk),
                  num_warps, key, DECIDE_INLINE=inline, SCREEN=screened(batch, device), BLOCK=block, **sizes,
                  **common)
    return VerifyResult(out, num_emitted, num_accepted)


_SEQUENTIAL = _Launcher(_verify_sequential_kernel)
_BLOCK = _Launcher(_verify_block_kernel)
_BLOCK_ROWS = _Launcher(_block_rows_kernel)
_BLOCK_MASSES = _Launcher(_block_masses_kernel)
_BLOCK_RACE = _Launcher(_block_race_kernel)
_TREE = _Launcher(_verify_tree_kernel)
_TREE_ROWS = _Launcher(_tree_rows_kernel)
_TREE_FINISH = _Launcher(_tree_finish_kernel)
_ROWS = _Launcher(_split_rows_kernel)
_TERMINAL = _Launcher(_split_terminal_kernel)
_PREPASS = _Launcher(_truncation_prepass_kernel)
_TRUNCATED = _Launcher(_verify_truncated_kernel)
_TRUNCATED_TERMINAL = _Launcher(_truncated_terminal_kernel)
_SPLIT_RADIX = _Launcher(radix._split_radix_kernel)
_SPLIT_HISTOGRAM = _Launcher(histogram._split_histogram_kernel)
_BRACKET_RACE = _Launcher(bracket_race._bracket_race_kernel)
_DRAFT_BOUNDS = _Launcher(draft_bounds._draft_bounds_kernel)
_LOGPROBS = _Launcher(_logprobs_kernel)
# Launch shapes of the truncation kernels (tokens a program reads per chunk, warps), by path: the
# prepass path of small batches, where a row's cutoff search is one program's work while the others
# wait (8 warps: a search of 8192 group maxima took 18.2 µs against 21.1 at 4), and the fused path of
# large ones, where each program streams its rows and searches between them (2048-token blocks,
# 8192-token passes), its registers capped so that FUSED_PROGRAMS_PER_SM programs share a multiprocessor
# (_register_cap: 128 a thread at 8 warps; ptxas puts the rest on the stack, outside the pass over a row).
# A launch variant's TUNING warps launch it uncapped (triton-sequential-2048x8: the uncapped 8-warp step).
# H200, graph, top_k 50 + top_p 0.9, draft logits, µs (results/h200-truncation-s3/): 1024 x 4 / 2048 x 8
# for the prepass at B = 1, 8, 64: 34.6 / 28.1, 44.9 / 37.0, 275.5 / 176.7. The fused step, draft logits /
# probs (results/h200-register-cap/): 2048 x 4 (254 registers, two programs a multiprocessor) / 2048 x 8
# uncapped (192 to 208: one) / 2048 x 8 capped at 128 (two): B = 256 558.7 / 702.7 / 442.0 and 231.2 /
# 256.7 / 210.7; B = 512 884.3 / 791.5 / 630.0 and 325.5 / 385.3 / 306.8 (the 2048 x 4 times at B = 512
# from final/, the rest from variants/)
TRUNCATION_SHAPES = {"prepass": (2048, 8), "fused": (2048, 8)}
FUSED_PROGRAMS_PER_SM = 2
_REGISTERS_PER_SM = 65536  # 32-bit registers a multiprocessor holds (sm_80 and sm_90)
_MAX_REGISTERS = 255  # the most a thread can have (a cap at or above it is none)


# One program per request (block verification's one-program path) or per emitted token (the
# log-probability epilogue) reading whole rows: the shape they were checked and timed at
ROW_PROGRAM_SHAPE = (1024, 4)


def _truncation_shape(vocab: int, device: torch.device, fused: bool = False) -> tuple[int, int]:
    return _program_shape(vocab, device, *TRUNCATION_SHAPES["fused" if fused and device.type == "cuda" else "prepass"])


def _register_cap(num_warps: int) -> int | None:
    # the registers a thread of the fused truncated step may take (Triton's maxnreg), so that
    # FUSED_PROGRAMS_PER_SM of its programs fit a multiprocessor; None where that needs no cap
    cap = _REGISTERS_PER_SM // (FUSED_PROGRAMS_PER_SM * 32 * num_warps)
    return cap if cap < _MAX_REGISTERS else None


def truncated_step_cap(fused: bool, num_warps: int) -> int | None:
    # the truncated step's register cap: the fused step's at the launcher's own shape, none at a launch
    # variant's TUNING warps or where the prepass summarised the rows
    return _register_cap(num_warps) if fused and not TUNING["num_warps"] else None


def _program_shape(vocab: int, device: torch.device, block: int, num_warps: int) -> tuple[int, int]:
    # (tokens a program reads per chunk, warps): a launch variant's TUNING over the given shape, the
    # block no larger than the row needs; the interpreter's small blocks on a CPU
    if device.type != "cuda":
        return min(max(_next_power_of_2(vocab), 16), 1024), 4
    block, num_warps = TUNING["block"] or block, TUNING["num_warps"] or num_warps
    block = min(block, max(_next_power_of_2(vocab), 128))
    return block, min(num_warps, max(block // 128, 1))


def _knob_args(top_k, top_p, min_p, temperatures) -> tuple[tuple, dict[str, bool]]:
    # the knob pointers (a given tensor stands in for one not given: never read) and their HAS_* flags
    args = tuple(temperatures if knob is None else knob for knob in (top_k, top_p, min_p))
    flags = {"HAS_TOP_K": top_k is not None, "HAS_TOP_P": top_p is not None, "HAS_MIN_P": min_p is not None}
    return args, flags


# The top-k path (rows with 1 <= top_k <= 64, specbench/kernels/cutoffs.py): groups of _GROUP tokens,
# at most MAX_GROUPS of them in a row, at most TOP_K_CAP_GROUPS gathered (more, from ties: the radix
# path); kept lists of _LIST tokens
_GROUP = 32
TOP_K_CAP_GROUPS = 64
_LIST = 64
# The radix path's chunk (its 16-bin histograms hold 16 values per token of it)
_RADIX_BLOCK = 1024
# The group maxima pass reads this many blocks a chunk: 8192 tokens at 2048 x 4 or 8, eight or sixteen
# 16-byte loads per thread in flight (one program streamed a 128256-token row in 105 µs at one 1024-token
# block a chunk, H200, results/h200-issue20-s2/)
_PASS_BLOCKS = 4
# The prepass splits each row so that no program reads fewer than this many groups of it
_MIN_SLICE_GROUPS = 64


def _group_shape(vocab: int, block: int, fused: bool = False) -> dict[str, int]:
    # the cutoff search's constexprs: the radix path's chunk, the top-k path's groups per chunk of its
    # pass (_PASS_BLOCKS blocks: more bytes in flight per program), the block of a row's group maxima,
    # the cap
    groups = -(-vocab // _GROUP)
    group_rows = min(max(block * _PASS_BLOCKS // _GROUP, 1), _next_power_of_2(groups))
    return {"RADIX_BLOCK": min(block, _RADIX_BLOCK), "GROUP_ROWS": group_rows,
            "GROUP_BLOCK": min(max(_next_power_of_2(groups), 16), MAX_GROUPS),
            "CAP_GROUPS": TOP_K_CAP_GROUPS}


class _TruncationScratch(NamedTuple):
    """The truncation kernels' scratch (``specbench/kernels/truncation.py``): the summaries first (at
    the start of the step's float32 and int32 scratch, where ``_summaries`` finds them), then per cell
    the group maxima, the gathered group ids and the kept list (ids, values, masses), then the split
    paths' state per cell and partials per (cell, slice) (``specbench/kernels/radix.py``), the deferred
    races' records and partials, and the split histogram path's counts and candidates per cell and its
    decisions per request (``decided``)."""

    summary_f: torch.Tensor
    summary_i: torch.Tensor
    group_max: torch.Tensor
    group_ids: torch.Tensor
    list_ids: torch.Tensor
    list_v: torch.Tensor
    list_w: torch.Tensor
    radix_state_f: torch.Tensor
    radix_state_i: torch.Tensor
    radix_part_f: torch.Tensor
    radix_part_i: torch.Tensor
    record_f: torch.Tensor
    record_i: torch.Tensor
    race_f: torch.Tensor
    race_i: torch.Tensor
    counts: torch.Tensor
    candidates_f: torch.Tensor
    candidates_i: torch.Tensor
    decided: torch.Tensor

    @classmethod
    def of(cls, batch: int, num_slots: int, vocab: int, device: torch.device, key,
           slices: int = 0, race_splits: int = 0, cap: int = 0) -> _TruncationScratch:
        # `slices`: a split path's slices of a row (0: no room for one); `race_splits`: the deferred
        # races' slices (0: the step races itself, no records); `cap`: the histogram path's candidates
        # per cell (0: no room for its counts and lists; its state and partials are the radix path's)
        cells = batch * num_slots * 2
        groups = -(-vocab // _GROUP)
        state = radix.STATE.value if slices else 0
        record = truncation.RECORD.value if race_splits else 0
        counts = histogram.COUNTS.value if cap else 0
        f_sizes = [cells * 4, cells * groups, cells * _LIST, cells * _LIST, cells * state,
                   cells * slices * radix.PART_F.value, batch * record, batch * race_splits * 2, cells * cap]
        i_sizes = [cells, cells * TOP_K_CAP_GROUPS, cells * _LIST, cells * state, cells * slices * radix.PART_I.value,
                   batch * record, batch * race_splits * 2, cells * counts, cells * cap,
                   batch * truncation.DECIDED_FIELDS.value if cap else 0]
        floats = _scratch(sum(f_sizes), torch.float32, device, key)
        ints = _scratch(sum(i_sizes), torch.int32, device, key)
        f = [floats[a:b] for a, b in zip(np.cumsum([0, *f_sizes[:-1]]), np.cumsum(f_sizes), strict=True)]
        i = [ints[a:b] for a, b in zip(np.cumsum([0, *i_sizes[:-1]]), np.cumsum(i_sizes), strict=True)]
        return cls(f[0], i[0], f[1], i[1], i[2], f[2], f[3], f[4], i[3], f[5], i[4], f[6], i[5], f[7], i[6], i[7],
                   f[8], i[8], i[9])

    @property
    def cutoffs(self) -> tuple[torch.Tensor, ...]:
        """The summaries and the top-k and radix paths' scratch, in the prepass's and the step's argument order."""
        return self[:7]


def _summaries(batch: int, num_slots: int, device: torch.device, key) -> tuple[torch.Tensor, torch.Tensor]:
    # the summaries [B, K + 1, 2, 4] float32 and [B, K + 1, 2] int32, in the step's scratch
    cells = batch * num_slots * 2
    return _scratch(cells * 4, torch.float32, device, key), _scratch(cells, torch.int32, device, key)


# The split radix path (batches given top_p or min_p without top_k, specbench/kernels/radix.py): tokens
# of a row per program, tokens per chunk, warps, on a GPU. The slice is the device's, never the
# batch's, so a row's sums (and its cutoff) do not depend on its batch. H200, graph, top_p 0.95 alone,
# draft logits, µs (results/h200-split-radix/): 4096 x 512 x 4 / 4096 x 1024 x 8 / 2048 x 512 x 8 /
# 1024 x 256 x 4 at B = 1: 193.8 / 190.3 / 193.3 / 188.1, B = 8: 403.9 / 461.9 / 472.8 / 451.8, B = 64:
# 3,450 / 4,263 / 4,372 / 4,044, B = 512: 37,109 / 47,179 / 47,157 / 43,676
RADIX_SHAPE = (4096, 512, 4)
# ... and whether its passes load each chunk one iteration ahead (RADIX_PREFETCH): off until a GPU
# timing says otherwise; the launch variants triton-radix-SLICExBLOCKxWARPS-prefetch turn it on
RADIX_PREFETCH = False


def _slice_shape(vocab: int, device: torch.device, path: str, default: tuple[int, int, int]) -> tuple[int, int, int]:
    # (slice, block, warps) of a split search (`path`: "radix" or "histogram", its TUNING keys' prefix); on a
    # CPU (the interpreter) blocks of 256 tokens
    if device.type != "cuda":
        block = min(max(_next_power_of_2(vocab), 16), 256)
        return block, block, 4
    slice_, block, num_warps = (TUNING[f"{path}_{name}"] or value for name, value in
                                zip(("slice", "block", "warps"), default, strict=True))
    block = min(block, max(_next_power_of_2(vocab), 128))
    return max(slice_, block), block, min(num_warps, max(block // 32, 1))


def _radix_shape(vocab: int, device: torch.device) -> tuple[int, int, int]:
    # (slice, block, warps) of the split radix path
    return _slice_shape(vocab, device, "radix", RADIX_SHAPE)


# Whether a batch given no top_k defers its races over whole rows to the split terminal launch on a GPU at every
# batch size (else only where it splits, B <= 66 on an H200). H200, graph, L = 3, target logits, draft logits /
# probs, µs, the race in the step (one program per request, 2048 x 8) -> deferred (results/h200-large-batch-race/):
# top_p 0.95 at B = 128 1,171.5 -> 1,088.7 / 671.0 -> 586.0, B = 256 2,255.1 -> 2,050.2 / 1,249.4 -> 1,063.6,
# B = 512 3,799.6 -> 3,438.0 / 2,068.7 -> 1,749.4; min_p 0.05 at B = 256 3,339.0 -> 3,132.5 / 1,861.9 -> 1,675.9.
# At B = 256 from draft logits the step took 353.5 µs of a cold call, and the step and its deferred race 5.8 + 142.7
DEFER_ON_GPU = True


def _defers_races(no_top_k: bool, split: bool, device: torch.device) -> bool:
    # whether a truncated step leaves its races over whole rows to the split terminal launch (DEFER): a batch
    # given no top_k (its rows have no kept list) where it splits, and on a GPU at every batch size unless one
    # program per request is forced (DEFER_ON_GPU); one given top_k races in the step (its rows with
    # 1 <= top_k <= 64 race over their kept lists, the only rows a batch must have for the deferred race to be
    # worth its launch)
    return no_top_k and (split or (DEFER_ON_GPU and _strategy == "auto" and device.type == "cuda"))


def _race_shape(vocab: int, device: torch.device, batch: int) -> tuple[int, int]:
    # (tokens per block, warps) of the deferred races (_truncated_terminal_kernel): the untruncated split
    # terminal kernel's shape
    return _launch_shape(vocab, device, True, "probabilistic", batch)


def _split_radix(arrivals: torch.Tensor, target_args: tuple, request_args: tuple, knobs: tuple, batch: int,
                 num_slots: int, vocab: int, sides: int, device: torch.device, key, race_splits: int,
                 **constexprs: object) -> _TruncationScratch:
    # every cutoff of a batch given no top_k, by the split radix path's launches: the largest value,
    # the eight digits of the cutoff's key, the cutoff's id (specbench/kernels/radix.py); its scratch
    slice_, block, num_warps = _radix_shape(vocab, device)
    slices = _cdiv(vocab, slice_)
    scratch = _TruncationScratch.of(batch, num_slots, vocab, device, key, slices, race_splits)
    args = (scratch.radix_state_f, scratch.radix_state_i, scratch.radix_part_f, scratch.radix_part_i, arrivals,
            scratch.summary_f, scratch.summary_i, *target_args, *request_args, *knobs, vocab, num_slots, slices)
    prefetch = _tuned("radix_prefetch", RADIX_PREFETCH)
    shape = {"SLICE": slice_, "BLOCK": block, "P_BLOCK": max(_next_power_of_2(slices), 2), "PREFETCH": prefetch,
             **constexprs}
    grid = (batch, num_slots, sides * slices)
    _SPLIT_RADIX(grid, (*args, 0), num_warps, key, STEP=0, FIRST=False, LAST=False, **shape)
    for digit in range(radix.DIGITS):
        _SPLIT_RADIX(grid, (*args, digit), num_warps, key, STEP=1, FIRST=digit == 0, LAST=digit == radix.DIGITS - 1,
                     **shape)
    _SPLIT_RADIX((batch, num_slots, sides), (*args, 0), num_warps, key, STEP=2, FIRST=False, LAST=False, **shape)
    return scratch


# The split histogram path (specbench/kernels/histogram.py): how a batch given no top_k finds its cutoffs
# (SPLIT_SEARCH; the launch variants triton-radix-SLICExBLOCKxWARPS take the split radix path instead, and
# triton-histogram-SLICExBLOCKxWARPS set this path's shape). Its tokens of a row per program, per chunk,
# warps on a GPU (the slice the device's, never the batch's); the parts of each level's window
# (HISTOGRAM_BINS, with as many levels as bring a part to 1/256 nat, _histogram_levels); the most
# candidates a row's list holds (more: one program searches the row, slowly). H200, each launch timed
# alone, top_p 0.95 on N(0, 1) target rows of 151936 tokens, B = 64 (320 rows), µs: the radix path's ten
# launches 1,834 (logits) / 1,783 (probs); 32 parts, four levels: 929 / 867; 64 parts, three levels: 733 / -;
# every row found among its candidates. End to end (CUDA graph, top_p 0.95, draft logits), radix ->
# histogram: 91.7 -> 50.9 at B = 1, 306.8 -> 164.5 at B = 8, 3,315.9 -> 1,288.0 at B = 64, 21,871 -> 8,309
# at B = 256; min_p 0.05 1.3x faster at B >= 64 (results/h200-histogram/end-to-end/)
# 128 or 256 parts a level in two levels (-bins128-levels2, -bins256; results/h200-histogram-two-levels/): 256 parts
# 2%-3% faster at B >= 256 and slower below (B = 8 112.7 against 108.8 / 86.5 against 72.5), 128 several times slower
# from B = 64; not taken at any batch (parts by batch would let a row's cutoff, within rounding of the boundary,
# depend on its batch). Those timings ran under Triton 3.6, whose tl.histogram pays warp ballots for every token,
# more the more parts (3.7 too); from 3.8 it is a shared-memory atomic that tokens outside the window skip (compiled
# for sm_90, a later level's loop 511 -> 247 instructions for 8 tokens a thread, results/cpu-triton-versions/), and
# the launcher takes 256 parts in two levels, every level counted by tl.histogram (HISTOGRAM_ATOMIC below off). H200,
# graph, top_p 0.95, draft logits / probs, µs, one machine (results/h200-triton39/): the path as 3.6 takes it, under
# 3.6 -> under 3.9 -> 256 parts without atomics under 3.9: B = 8 92.2 -> 78.7 -> 76.0 / 71.3 -> 66.4 -> 62.3, B = 64
# 517.1 -> 420.8 -> 374.4 / 284.4 -> 237.1 -> 214.2, B = 256 1,935.1 -> 1,568.5 -> 1,345.3 / 1,001.3 -> 824.4 ->
# 724.8, B = 512 3,242.0 -> 2,604.7 -> 2,259.4 / 1,648.8 -> 1,354.7 -> 1,188.3. Within a Triton version the parts
# never change, so a row's summary never depends on its batch; across versions it may differ within rounding of the
# boundary, as any compiler's arithmetic may
SPLIT_SEARCH = "histogram"
HISTOGRAM_SHAPE = (4096, 1024, 4)
HISTOGRAM_SHARED_ATOMICS_FROM = (3, 8)  # the first Triton whose tl.histogram counts by shared-memory atomics


def _triton_version(text: str) -> tuple[int, int]:
    # (major, minor) of a Triton version ("3.9.0", "3.10.0+git...")
    major, minor = text.split(".")[:2]
    return int(major), int("".join(char for char in minor if char.isdigit()) or 0)


def _histogram_defaults(version: tuple[int, int]) -> tuple[int, bool]:
    # (parts a level, whether the last level counts by atomics) the launcher takes under a Triton version
    return (256, False) if version >= HISTOGRAM_SHARED_ATOMICS_FROM else (64, True)


HISTOGRAM_BINS, HISTOGRAM_ATOMIC = _histogram_defaults(_triton_version(triton.__version__))
# ... the most candidates a row's list holds, each list sorted at the least of an eighth, a quarter, half or all of
# that which holds it (histogram._finish). H200, graph, top_p 0.95, draft logits / probs, µs, a list of more
# than 128 sorted at 1,024 -> by its length (results/h200-finish-sorts/): B = 8 107.4 -> 91.4 / 70.6 -> 70.6, B = 64
# 534.0 -> 513.8 / 293.4 -> 283.6, B = 256 1,951.8 -> 1,928.8 / 1,009.8 -> 995.0, B = 512 3,251.8 -> 3,232.5 /
# 1,658.1 -> 1,644.9
HISTOGRAM_CAP = 1024
# ... whether its last level (after the first) counts its window's tokens by integer atomics on the cell's counts
# instead of tl.histogram, whose code costs the same for every token in the window or not (the last window held at
# most about 3% of a row in the distributions modelled, results/h200-histogram/ncu-sass/; a row of ties puts every
# token there), and how many slices of a row each of its programs takes in turn (each slice's sums apart, so a
# row's summary is the same at any count; the launch variants triton-histogram-...-atomic / -noatomic and -slicesN
# choose). H200, graph, top_p 0.95, draft logits / probs, µs, tl.histogram -> atomics
# (results/h200-histogram-variants/): B = 8 121.0 -> 116.4 / 80.4 -> 78.0, B = 64 569.6 -> 543.7 / 313.3 -> 298.6,
# B = 256 2,052.2 -> 1,964.8 / 1,064.5 -> 1,019.4, B = 512 3,445.9 -> 3,292.7 / 1,746.3 -> 1,671.4; two or four
# slices a program slower at every batch (B = 256: 2,208.0 / 2,139.8 from logits, 2,176.0 / 2,080.1 with atomics).
# Those ran under Triton 3.6; from 3.8 (HISTOGRAM_SHARED_ATOMICS_FROM) the last level counts by tl.histogram, which
# tokens outside the window skip there (HISTOGRAM_ATOMIC, set above: 256 parts with atomics under 3.9 1,470.0 against
# 1,345.3 without at B = 256 from logits, slower at every batch measured, results/h200-triton39/)
HISTOGRAM_SLICES_PER_PROGRAM = 1
# ... and whether each program takes its slice of every row of its request in turn (one program per request and
# slice, not per cell and slice), where the drafts were decided from one pass's bounds and most cells are skipped
# (histogram.py, ROWS_PER_REQUEST; the launch variants triton-histogram-...-percell / -perrequest choose), up to
# HISTOGRAM_PER_REQUEST_MAX_BATCH requests. H200, graph, top_p 0.95, draft logits / probs, µs, one program a cell ->
# a request (results/h200-histogram-per-request/): B = 8 118.8 -> 109.8 / 78.7 -> 73.6; B = 64 547.4 -> 601.4 /
# 299.4 -> 313.7, B = 256 1,969.7 -> 2,082.1 / 1,017.1 -> 1,065.9 (slower; compiled for sm_90 the loop takes the
# first level from 71 to 109 registers a thread, the likely cause, not measured apart); 9 to 63 not measured
HISTOGRAM_PER_REQUEST_MAX_BATCH = 8
# ... or, from HISTOGRAM_STOP_ROW_MIN_BATCH requests, each step in two launches: one program per request and slice for
# its stop row, then one per request and HISTOGRAM_AFTER_SLICES slices for the rows after it where it did not stop
# clean, each of those loading its request's decision first and leaving at once where it stopped clean (histogram.py,
# ROWS_AT_STOP and ROWS_AFTER_STOP; the launch variants -stoprow, -stoprow-afterN). H200, Triton 3.6, graph, top_p
# 0.95, draft logits / probs, µs (results/h200-stop-row/): the rows after taking one slice a program and loading
# everything before leaving, against the launcher's way before: B = 8 91.4 -> 100.2 / 70.6 -> 80.6 (one program a
# request before), B = 64 514.9 -> 517.8 / 282.9 -> 292.2, B = 256 1,930.8 -> 1,787.1 / 997.1 -> 960.7, B = 512
# 3,233.5 -> 2,953.2 / 1,647.6 -> 1,566.3 (those launches 30-67 µs each at B = 256 from logits); leaving at once, 1,
# 4, 8 and 16 slices a program (after/): B = 256 1,787.6 -> 1,600.0, 1,553.9, 1,544.8 (/ 959.3 -> 873.8, 852.5,
# 848.4), B = 512 (8, 16) 2,953.2 -> 2,549.5, 2,542.9 (/ 1,565.2 -> 1,379.6, 1,376.5); the launcher's way before ->
# 8 slices: B = 8 91.5 -> 93.3 / 70.6 -> 75.9 (one program a request), B = 16 169.7 -> 163.2 / 116.3 -> 113.2, 32
# 288.0 -> 267.6 / 168.4 -> 164.2, 64 514.1 -> 467.9 / 283.0 -> 266.3, 128 1,018.5 -> 832.2 / 543.2 -> 472.2 (one
# program a cell); 9 to 15 not measured. At B = 256 the launches for the rows after now take 1.7-3.6 µs each
HISTOGRAM_STOP_ROW_MIN_BATCH: int | None = 16
HISTOGRAM_AFTER_SLICES = 8
HISTOGRAM_ROWS_WAYS = ("cell", "request", "stop")  # the launch variants' histogram_rows 0, 1, 2


def _histogram_rows(way: str | None, batch: int) -> str:
    # which rows the split histogram path's programs take: "cell" (one program per row), "request" (its request's
    # rows in turn) or "stop" (its request's stop row, then the rows after it), a launch variant's at any batch and
    # decision way ("stop" only after decisions from the bounds, which say each request's stop)
    forced = TUNING["histogram_rows"]
    if forced is not None:
        rows = HISTOGRAM_ROWS_WAYS[forced]
        if rows == "stop" and way != "bounds":
            return "cell"
        return rows
    if way != "bounds":
        return "cell"
    if HISTOGRAM_STOP_ROW_MIN_BATCH is not None and batch >= HISTOGRAM_STOP_ROW_MIN_BATCH:
        return "stop"
    return "request" if batch <= HISTOGRAM_PER_REQUEST_MAX_BATCH else "cell"


# ... and whether, where the drafts were decided from one pass's bounds, its first launch takes the largest value of
# each searched row at a request's stop t < n from that pass (which read the row; histogram.py, BOUNDS_MAX) instead
# of reading the row again (the launch variants triton-histogram-...-boundsmax / -noboundsmax choose). H200, graph,
# top_p 0.95, draft logits / probs, µs, read again -> from the bounds pass (results/h200-bounds-max/): B = 8 108.5 ->
# 106.8 / 72.4 -> 70.7, B = 64 542.6 -> 535.5 / 297.8 -> 293.9, B = 256 1,965.2 -> 1,952.2 / 1,016.4 -> 1,012.2,
# B = 512 3,284.3 -> 3,253.3 / 1,667.8 -> 1,660.7
HISTOGRAM_BOUNDS_MAX = True
# ... and whether the bounds pass and the search's levels and gather take the masses they only sum (logits without
# min_p) by one MUFU.EX2 that flushes results below 2**-126 (rows.exp_in_sum) instead of tl.exp, whose 2**x adds a
# fix-up of three instructions a token: the same sums but for chains of exact rounding ties (rows.py says why; only
# the first level's and the bounds pass's sums take masses that small: the later levels and the gather sum tokens
# within 32 nats of the largest value; tests/test_launch.py compares the two on a GPU), three instructions a token
# fewer in each of those loops (sm_90, results/cpu-ftz-sums/: the bounds pass
# 40.0 -> 37.0 under Triton 3.6, the levels 67.0 -> 63.9 to 40.2 -> 37.2, the gather 58.4 -> 55.4). H200, Triton
# 3.6, top_p 0.95, graph, draft logits / probs, µs, tl.exp -> one instruction (results/h200-ftz-sums/): B = 8 92.4 ->
# 90.2 / 71.3 -> 70.0, B = 64 470.6 -> 460.2 / 267.7 -> 262.6, B = 256 1,549.5 -> 1,512.9 / 849.6 -> 832.7 (the launch
# variants -ftz / -noftz choose)
HISTOGRAM_FTZ_SUMS = True
# ... and whether the sums of masses above a bound (the bounds pass's above each depth and ahead of the draft, from
# logits or probabilities; the search's later levels' and gather's before the window, from logits without min_p) add
# each token's mass by a compare and a predicated add (rows.add_if_above, add_if_ahead: inline PTX) instead of a select
# and an add, and the first level's mass in play with no test (logits without min_p: a token out of play has mass +0):
# the same additions, so the same sums to the bit. Compiled for sm_90 (results/cpu-predicated-sums/): the
# bounds pass's loop 37.8 -> 28.5 instructions a token under Triton 3.9. H200, Triton 3.6, top_p 0.95, graph, draft
# logits / probs, µs, select -> predicated (results/h200-predicated-sums/): B = 8 89.8 -> 84.7 / 69.5 -> 68.6, B = 64
# 458.3 -> 420.9 / 261.2 -> 241.1, B = 256 1,507.4 -> 1,392.1 / 829.3 -> 768.9, B = 512 2,490.2 -> 2,295.2 / 1,348.8 ->
# 1,243.3 (the launch variants -pred / -nopred choose)
HISTOGRAM_PREDICATED_SUMS = True
# ... and whether, where the drafts were decided first (HISTOGRAM_DECIDE), the race at each request's clean stop is
# tried from a level's bracket (specbench/kernels/bracket_race.py: one more launch over the stop rows), so that the
# levels after it, the gather and the finish pass over the stop rows it decides: after which level, by draft form,
# below HISTOGRAM_BRACKET_RACE_FIRST_MIN_BATCH requests (0: never; the launch variants -raceN / -norace choose); from
# that batch on, every form after the first level. H200, Triton 3.6, top_p 0.95, L = 3, graph, µs, never / after the
# first level / after the second (results/h200-bracket-race/, before the first level's tighter bound): draft logits
# B = 8 85.8 / 90.8 / 71.0, B = 64 423.1 / 431.3 / 424.7, B = 256 1,397.8 / 1,372.0 / 1,360.7, B = 512 2,303.4 /
# 2,171.1 / 2,208.6; draft probabilities 69.3 / 53.1 / 59.0, 244.1 / 234.6 / 220.6, 772.3 / 703.2 / 757.2, 1,246.2 /
# 1,105.1 / 1,203.2. With the tighter bound (histogram._finish_level, results/h200-first-level-bound/), draft logits
# never / first / second: B = 8 80.7 / 87.8 / 70.8, B = 64 411.0 / 386.4 / 380.0, B = 256 1,370.1 / 1,233.3 /
# 1,308.8, B = 512 2,257.9 / 1,929.2 / 2,193.2: the first level's bracket now decides most draft-logits races, which
# pays where the later levels' work is the cost (large batches), not at B = 8, where their launches' latency is.
# One-hot drafts (not timed) race over p' alone, as the bonus row does, so they take the first level
HISTOGRAM_BRACKET_RACE = {truncation.DRAFT_NONE.value: 1, truncation.DRAFT_LOGITS.value: 2,
                          truncation.DRAFT_PROBS.value: 1}
HISTOGRAM_BRACKET_RACE_FIRST_MIN_BATCH = 128


def _histogram_cap(device: torch.device) -> int:
    # the most candidates a row's list holds (HISTOGRAM_CAP; under the interpreter, which sorts slowly, at most 64)
    return HISTOGRAM_CAP if device.type == "cuda" else min(HISTOGRAM_CAP, 64)


def _histogram_shape(vocab: int, device: torch.device) -> tuple[int, int, int]:
    # (slice, block, warps) of the split histogram path
    return _slice_shape(vocab, device, "histogram", HISTOGRAM_SHAPE)


# The decisions from one pass's bounds before the search (specbench/kernels/draft_bounds.py): tokens of a row per
# program, per chunk, warps on a GPU (each chunk loaded one iteration ahead). H200, graph, top_p 0.95, draft
# logits, µs, 16384 x 1024 x 4 / 8192 x 512 x 4 / 16384 x 2048 x 8 (results/h200-draft-bounds/, the second call):
# B = 8 135.5 / 135.2 / 136.5, B = 64 927.7 / 922.7 / 966.6, B = 256 7,168 / 7,134 / 7,464 (drafts far below their
# row's largest value were left undecided then: the search's cost in every row, the pass's differences alone
# matter); third call, 16384 x 1024 x 4 / 8192 x 512 x 4: B = 64 571.9 / 566.5, B = 256 2,836.1 / 2,803.2
BOUNDS_SHAPE = (8192, 512, 4)


def _bounds_shape(vocab: int, device: torch.device) -> tuple[int, int, int]:
    # (slice, block, warps) of the bounds pass
    return _slice_shape(vocab, device, "bounds", BOUNDS_SHAPE)


# ... and from how many requests it runs in rounds, one per slot, so that the rows after a request's first
# rejection are never read (each round two launches). H200, graph, top_p 0.95, draft logits / probs, µs, every
# slot at once -> rounds (results/h200-draft-bounds/): B = 8 121.3 -> 141.8 / 80.3 -> 102.8, B = 64 566.4 ->
# 549.7 / 313.6 -> 316.1, B = 256 2,802.3 -> 2,258.2 / 1,511.2 -> 1,251.0, B = 512 4,729.7 -> 3,800.0 / 2,524.2 ->
# 2,071.6
BOUNDS_ROUNDS_MIN_BATCH = 128
# ... and up to how many requests each request's decisions are taken by its last program to arrive of the launch
# before them (the bounds pass, draft_bounds.py, or the first level where the drafts are decided after it,
# histogram.py; FOLD in each) instead of by a launch of their own (the launch variants ...-fold / -nofold choose at
# any batch): one launch fewer a round, and the launch before holds the decision's code. H200, graph, top_p 0.95, L = 3,
# draft logits / probs, µs, a launch of their own -> folded (results/h200-decision-fold/): Llama 3, K = 3, B = 1
# 42.6 -> 41.8 / 37.1 -> 36.9, B = 2 47.7 -> 46.9 / 40.1 -> 39.4, B = 4 59.7 -> 59.1 / 45.2 -> 44.6, B = 8 70.7 ->
# 70.1 / 52.5 -> 52.0; Qwen 3, B = 64, K = 4 379.8 -> 389.3 / 188.1 -> 191.4, B = 256, K = 7 1,231.9 -> 1,248.4 /
# 651.1 -> 658.6
DECISION_FOLD_MAX_BATCH = 8


def _bounds_rounds(batch: int) -> bool:
    # whether the bounds pass runs in rounds (a launch variant's -rounds / -norounds at any batch)
    return _tuned("bounds_rounds", batch >= BOUNDS_ROUNDS_MIN_BATCH)


def _decision_fold(batch: int) -> bool:
    # whether each request's decisions are taken by the launch before them (a launch variant's -fold / -nofold at any
    # batch)
    return bool(_tuned("decision_fold", batch <= DECISION_FOLD_MAX_BATCH))


# Up to how many requests a truncated step's launches (the prepass, the split radix and histogram paths, the draft
# bounds, the bracket race, the step and its terminal race) are dependent launches (dependent_launch.py): each placed
# on the GPU while the one before it runs, waiting there for it to finish. A small batch's step is a chain of eight or
# nine launches that do not fill the GPU. Hopper and later only. H200, Triton 3.6, CUDA graph, L = 3
# (results/h200-dependent-launch/): top_p 0.95 from draft logits / probs 1.7 / 2.3 µs faster at B = 1 (of 39.0 /
# 34.1), 1.3 / 2.4 at B = 2, 0.1 / 2.5 at B = 4, -0.3 / 2.0 at B = 8 (the minus: slower); at B = 64 within 0.5%;
# top_k 50 + top_p 0.9 0.6 / 0.4 faster at B = 1, 0.3 / -0.2 at B = 8. So up to 8 requests (the launch variants
# triton-pdl / triton-nopdl, and -pdl / -nopdl after a histogram variant's name, at any batch)
DEPENDENT_LAUNCH_MAX_BATCH = 8


def _dependent_launch(batch: int, device: torch.device) -> bool:
    # whether a truncated step of `batch` requests on `device` launches its kernels as dependent launches
    if not _tuned("dependent_launch", batch <= DEPENDENT_LAUNCH_MAX_BATCH):
        return False
    return not INTERPRETED and device.type == "cuda" and _compute_capability(device.index or 0)[0] >= 9


def _histogram_levels(bins: int) -> int:
    # levels until a part is at most 1/256 nat: the first level's parts are 32 / bins nats, the second
    # cuts eight of them into `bins` (the first level's bounds are the loosest: on N(0, 1) and N(0, 16)
    # logits of 151936 tokens at top_p 0.5 to 0.999 its 64 parts keep 1 to 4, 1 to 19 with its bounds before
    # 2026-12-02, results/h200-histogram/model_levels.py), each later one four parts of the one before
    levels, part, kept = 1, 32 / bins, 8
    while part > 1 / 256:
        levels, part, kept = levels + 1, part * kept / bins, 4
    return levels


def _split_histogram(arrivals: torch.Tensor, target_args: tuple, request_args: tuple, knobs: tuple, batch: int,
                     num_slots: int, vocab: int, sides: int, device: torch.device, key, race_splits: int,
                     decide: tuple | None = None, **constexprs: object) -> _TruncationScratch:
    # every cutoff of a batch given no top_k, by the split histogram path's launches: the largest value,
    # each level's counts, the candidates, the cutoffs (specbench/kernels/histogram.py); its scratch.
    # `decide`: (draft ids, draft form, way) to decide each request's first drafts and search only the rows the
    # step will read, from one pass's bounds before the search (way "bounds", draft_bounds.py) or after the
    # first level (way "level", histogram.STEP_DECIDE); None: every row a step may read
    slice_, block, num_warps = _histogram_shape(vocab, device)
    bins = TUNING["histogram_bins"] or HISTOGRAM_BINS
    # (fewer than 16 parts would not narrow the window: eight kept parts of eight are the whole window)
    if bins & (bins - 1) or not 16 <= bins <= histogram.MAX_BINS:
        raise ValueError(f"the histogram path takes a power of two from 16 to {histogram.MAX_BINS} parts a level, "
                         f"got {bins}")
    # (a launch variant's levels, or as many as bring a part to 1/256 nat; fewer leave more candidates, and a row
    # with more than the list holds is searched by one program: exact either way)
    levels = TUNING["histogram_levels"] or _histogram_levels(bins)
    if not 1 <= levels <= histogram.MAX_LEVELS:  # (the counts hold MAX_LEVELS levels; 16 parts take six)
        raise ValueError(f"the histogram path takes 1 to {histogram.MAX_LEVELS} levels, got {levels}")
    # (a part of the last level is at least 256 units / bins ** levels wide: at least 2**-16 units of logits, the
    # float32 grid of a window's distances, and at least one bit pattern of probabilities, 2**28 / bins ** levels)
    if bins ** levels > 2 ** 24 or bins * levels > histogram.COUNTS.value - 1:
        raise ValueError(f"the histogram path takes parts ** levels up to 2**24, got {bins} ** {levels}")
    slices = _cdiv(vocab, slice_)
    cap = _histogram_cap(device)
    draft_ids, draft_kind, way = decide if decide is not None else (request_args[0], 0, None)  # (ids never read)
    bounds_slice, bounds_block, bounds_warps = _bounds_shape(vocab, device)
    bounds_slices = _cdiv(vocab, bounds_slice) if way == "bounds" else 0
    # (the bounds pass's partials stand in the search's, room for the more slices of the two)
    scratch = _TruncationScratch.of(batch, num_slots, vocab, device, key, max(slices, bounds_slices), race_splits,
                                    cap)
    zero_share = _cdiv(_cdiv(histogram.COUNTS.value, slices), 256) * 256
    p_block = max(_next_power_of_2(slices), 2)
    ftz_sums = _tuned("histogram_ftz_sums", HISTOGRAM_FTZ_SUMS)
    predicated_sums = _tuned("histogram_predicated_sums", HISTOGRAM_PREDICATED_SUMS)
    decision_fold = _decision_fold(batch)
    if way == "bounds":
        bounds_args = (scratch.radix_part_f, scratch.decided, scratch.radix_state_f[histogram.F_M.value:], arrivals,
                       *target_args, draft_ids, draft_ids.stride(0),
                       *request_args, *knobs, vocab, num_slots, bounds_slices)
        rounds = _bounds_rounds(batch) and num_slots > 2
        bounds_shape = {"MODE": constexprs["MODE"], "DRAFT": draft_kind, "TARGET_PROBS": constexprs["TARGET_PROBS"],
                        **{flag: constexprs[flag] for flag in ("HAS_TOP_K", "HAS_TOP_P", "HAS_MIN_P")},
                        "ROUNDS": rounds, "SLICE": bounds_slice, "BLOCK": bounds_block, "PREFETCH": True,
                        "P_BLOCK": max(_next_power_of_2(bounds_slices), 2), "ROW_MAX_STRIDE": histogram.STATE.value,
                        "FTZ_SUMS": ftz_sums, "PREDICATED_SUMS": predicated_sums,
                        "PDL": constexprs.get("PDL", False)}
        # one round per slot (each reading only the rows of requests that accepted every slot before it), or one
        # for every slot; with _decision_fold, each request's last program of the pass decides (a step of no draft
        # slot, num_slots 1, still takes the decision's own launch)
        bounds_fold = decision_fold and num_slots > 1
        for slot in range(num_slots - 1) if rounds else (0,):
            if num_slots > 1:
                _DRAFT_BOUNDS((batch, 1 if rounds else num_slots - 1, sides * bounds_slices), (*bounds_args, slot),
                              bounds_warps, key, **bounds_shape, STEP=0, FOLD=bounds_fold)
            if not bounds_fold:
                _DRAFT_BOUNDS((batch,), (*bounds_args, slot), 1, key, **bounds_shape, STEP=1, FOLD=False)
    args = (scratch.radix_state_f, scratch.radix_state_i, scratch.radix_part_f, scratch.radix_part_i, scratch.counts,
            scratch.candidates_f, scratch.candidates_i, arrivals, scratch.summary_f, scratch.summary_i,
            scratch.decided, *target_args, draft_ids, draft_ids.stride(0), *request_args, *knobs, vocab, num_slots,
            slices, zero_share)
    per_program = TUNING["histogram_slices_per_program"] or HISTOGRAM_SLICES_PER_PROGRAM
    atomic = _tuned("histogram_atomic", HISTOGRAM_ATOMIC)
    rows_way = _histogram_rows(way, batch)
    races = bracket_races(way, draft_kind, batch)
    shape = {"SLICE": slice_, "BLOCK": block, "BINS": bins, "BINS_SHIFT": bins.bit_length() - 1, "CAP": cap,
             "P_BLOCK": p_block, "ROW_BLOCK": max(_next_power_of_2(num_slots), 2) if rows_way != "cell" else 2,
             "FTZ_SUMS": ftz_sums, "PREDICATED_SUMS": predicated_sums,
             **constexprs}
    # each step's launches, by the rows their programs take (histogram.py, ROWS), with the grid's second dimension and
    # the slices a program: one program per row, or per request taking its rows in turn, or per request for its stop
    # row and then per request and HISTOGRAM_AFTER_SLICES slices for the rows after it (a launch variant's -afterN: N
    # slices)
    after = TUNING["histogram_after_slices"] or HISTOGRAM_AFTER_SLICES
    passes = {"cell": ((histogram.ROWS_PER_CELL.value, num_slots, per_program),),
              "request": ((histogram.ROWS_PER_REQUEST.value, 1, per_program),),
              "stop": ((histogram.ROWS_AT_STOP.value, 1, per_program),
                       (histogram.ROWS_AFTER_STOP.value, 1, after))}[rows_way]
    passes = passes[:1] if num_slots == 1 else passes  # (no draft: no row after a stop)

    def each_pass(step: int, level: int, per_cell: bool = False, **flags: object) -> None:
        for rows, second, per in passes:
            _SPLIT_HISTOGRAM((batch, second, sides if per_cell else sides * _cdiv(slices, per)), (*args, level),
                             num_warps, key, STEP=step, ROWS=rows, SLICES_PER_PROGRAM=per, **flags, **shape)

    # (DECIDE, SKIP_DECIDED, BOUNDS_MAX and DRAFT only where they change the code: the first launch, the first level
    # and STEP_DECIDE)
    plain = {"DECIDE": False, "SKIP_DECIDED": False, "BOUNDS_MAX": False, "DRAFT": 0, "ATOMIC": False, "FOLD": False}
    bounds_max = _tuned("histogram_bounds_max", HISTOGRAM_BOUNDS_MAX)
    each_pass(0, 0, **{**plain, "SKIP_DECIDED": way == "bounds", "BOUNDS_MAX": way == "bounds" and bounds_max},
              FIRST=False, LAST=False)
    for level in range(levels):
        after_first = level == 0 and way == "level"
        # (with _decision_fold each request's decisions after the first level taken by its last program of that level)
        folded = {"FOLD": True, "DRAFT": draft_kind} if after_first and decision_fold else {}
        each_pass(1, level, **{**plain, "DECIDE": after_first, "ATOMIC": atomic and 0 < level == levels - 1, **folded},
                  FIRST=level == 0, LAST=level == levels - 1)
        if after_first and not decision_fold:
            _SPLIT_HISTOGRAM((batch,), (*args, 0), 1, key, STEP=4, ROWS=histogram.ROWS_PER_CELL.value,
                             SLICES_PER_PROGRAM=per_program, **{**plain, "DECIDE": True, "DRAFT": draft_kind},
                             FIRST=False, LAST=False, **shape)
        if level == min(races, levels) - 1:
            _BRACKET_RACE((batch, slices),
                          (scratch.radix_state_f, scratch.radix_state_i, scratch.radix_part_f, scratch.radix_part_i,
                           arrivals, scratch.summary_f, scratch.summary_i, scratch.decided, *target_args, draft_ids,
                           draft_ids.stride(0), *request_args, *knobs, vocab, num_slots, slices),
                          num_warps, key, MODE=constexprs["MODE"], DRAFT=draft_kind,
                          TARGET_PROBS=constexprs["TARGET_PROBS"],
                          **{flag: constexprs[flag] for flag in ("HAS_TOP_K", "HAS_TOP_P", "HAS_MIN_P")},
                          SLICE=slice_, BLOCK=block, P_BLOCK=p_block, PDL=constexprs.get("PDL", False))
    each_pass(2, 0, **plain, FIRST=False, LAST=False)
    each_pass(3, 0, per_cell=True, **plain, FIRST=False, LAST=False)
    return scratch


# Whether a batch given no top_k decides its requests' first drafts before the search and searches only the
# rows its step will then read, and how: from one pass's bounds before the search ("bounds",
# specbench/kernels/draft_bounds.py: a batch given no min_p, whose requests have top_p alone) or after the split
# histogram path's first level ("level", histogram.STEP_DECIDE: a batch given min_p too), or not at all (None).
# The probabilistic mode without log-probabilities, top_p given, drafts one-hot, probabilities or truncated
# logits, from HISTOGRAM_DECIDE_MIN_BATCH requests, and below as HISTOGRAM_SMALL_BATCH_DECIDE says (the launch
# variants triton-histogram-...-nodecide never, triton-histogram-...-decide and -bounds at any batch, each its way).
# H200, graph, top_p 0.95, L = 3, draft logits / probs, µs: every row searched -> decided after the first level
# (results/h200-decide/): B = 1 50.2 -> 55.2 / 48.1 -> 51.0 (one more launch on the path of a step that fills no
# GPU), B = 8 161.3 -> 139.1 / 92.3 -> 81.6, B = 64 1,234.6 -> 799.9 / 709.3 -> 450.6, B = 256 7,956.7 -> 4,547.0 /
# 4,370.9 -> 2,482.1, B = 512 13,530.4 -> 7,719.6 / 7,404.1 -> 4,197.7; decided after the first level -> from one
# pass's bounds (results/h200-draft-bounds/, one process a shape): B = 1 54.9 -> 61.5 / 50.7 -> 59.9, B = 8
# 137.2 -> 121.3 / 81.2 -> 80.3, B = 64 795.8 -> 566.4 / 450.2 -> 313.6, B = 256 4,525.5 -> 2,258.2 / 2,469.8 ->
# 1,251.0 (in rounds), B = 512 7,689.2 -> 3,800.0 / 4,177.8 -> 2,071.6 (in rounds)
HISTOGRAM_DECIDE = True
HISTOGRAM_DECIDE_MIN_BATCH = 8
DECIDE_WAYS = (None, "level", "bounds")  # the launch variants' histogram_decide 0, 1, 2
# Below HISTOGRAM_DECIDE_MIN_BATCH requests, a batch given top_p and no min_p decides its drafts as this says for its
# draft form: (from batch, way, the level after which its bracket race is tried) in rising batches, the last whose
# batch the step reaches (none: every row searched). That threshold was set before the bracket race
# (bracket_race.py), which leaves a request deciding first one stop row that a bracket usually decides. H200, Triton
# 3.6, top_p 0.95, L = 3, graph, µs, the launcher before (every row searched below 8 requests) / from the bounds, race
# after level 1 / the same after level 2 / after the first level, race after it (results/h200-small-batch-decide/):
# draft logits B = 1 47.9 / 50.1 / 55.3 / 42.8, B = 2 57.7 / 51.9 / 56.9 / 47.6, B = 4 76.9 / 77.4 / 59.9 / 82.0, B = 8
# 70.9 / 87.9 / 70.8 / 104.7; draft probabilities B = 4 59.3 / 50.0 / 55.1 / 45.4, B = 8 52.6 / 52.7 / 58.4 / 57.0. The
# second call (the table's choice against the others): draft logits B = 3 59.1 from the bounds, race after level 2 /
# 79.4 after the first level, B = 6 65.4 / 69.3; draft probabilities B = 1 37.2 after the first level / 47.6 and 52.7
# from the bounds, race after level 1 and 2, B = 2 40.1 / 48.8 and 54.0, B = 3 42.5 / 49.5 (the bounds, race after
# level 1), B = 6 51.2 / 51.9 (the same). One-hot drafts (not timed) as probabilities
HISTOGRAM_SMALL_BATCH_DECIDE = {truncation.DRAFT_LOGITS.value: ((1, "level", 1), (3, "bounds", 2)),
                                truncation.DRAFT_PROBS.value: ((1, "level", 1),),
                                truncation.DRAFT_NONE.value: ((1, "level", 1),)}


def _small_batch_decide(draft_kind: int, batch: int) -> tuple[str | None, int]:
    # HISTOGRAM_SMALL_BATCH_DECIDE's way and race level for a batch below HISTOGRAM_DECIDE_MIN_BATCH
    way, races = None, 0
    for start, each_way, each_races in HISTOGRAM_SMALL_BATCH_DECIDE[draft_kind]:
        if batch >= start:
            way, races = each_way, each_races
    return way, races


def _decides(mode: str, logprobs: bool, draft_kind: int, truncate_draft: bool, batch: int, top_p: bool,
             min_p: bool = False) -> str | None:
    # how a step given no top_k decides its first drafts before the search (HISTOGRAM_DECIDE; a launch
    # variant's way at any batch), or None; `top_p`, `min_p`: whether each is given (min_p alone keeps every
    # token in play after the first level, so no row is left to skip; requests with min_p decide nothing from
    # the bounds, which know no row's largest value before the sums)
    forced = TUNING["histogram_decide"]
    if forced is not None:
        way = DECIDE_WAYS[forced]
    elif HISTOGRAM_DECIDE and batch >= HISTOGRAM_DECIDE_MIN_BATCH:
        way = "level" if min_p else "bounds"
    elif HISTOGRAM_DECIDE and not min_p:
        way = _small_batch_decide(draft_kind, batch)[0]
    else:
        way = None
    wanted = (top_p and _split_search() == "histogram" and mode == "probabilistic" and not logprobs
              and (draft_kind != 1 or truncate_draft))
    return way if wanted else None


def bracket_races(way: str | None, draft_kind: int, batch: int) -> int:
    """After which level of the search a step of ``batch`` requests whose drafts are decided first (``way``,
    ``_decides``) tries each clean stop's race from that level's bracket (``HISTOGRAM_BRACKET_RACE`` for its draft
    form, the first from ``HISTOGRAM_BRACKET_RACE_FIRST_MIN_BATCH`` requests, or a launch variant's ``-raceN`` /
    ``-norace``; 0: it does not)."""
    forced = TUNING["histogram_race"]
    if way is None:
        return 0
    if forced is not None:
        return forced
    if batch < HISTOGRAM_DECIDE_MIN_BATCH and TUNING["histogram_decide"] is None:  # (the way is the table's)
        return _small_batch_decide(draft_kind, batch)[1]
    return 1 if batch >= HISTOGRAM_BRACKET_RACE_FIRST_MIN_BATCH else HISTOGRAM_BRACKET_RACE[draft_kind]


def _split_search() -> str:
    # how a batch given no top_k finds its cutoffs: "radix" or "histogram" (a launch variant's, else SPLIT_SEARCH)
    return SPLIT_SEARCH if TUNING["split_search"] is None else ("radix", "histogram")[TUNING["split_search"]]


def _summarize(target_args: tuple, request_args: tuple, knobs: tuple, batch: int, num_slots: int, vocab: int,
               sides: int, device: torch.device, key, *, no_top_k: bool, prepass: bool, num_warps: int,
               group_shape: dict[str, int], race_splits: int = 0, decide: tuple | None = None,
               **common: object) -> _TruncationScratch:
    """The launches that summarise a truncated step's rows before it: the split radix or histogram path
    (``no_top_k``: a batch given no top_k; ``_split_search`` says which), else the prepass (``prepass``),
    else none (the fused step summarises its own rows); returns the step's scratch, where the summaries are (and room for
    ``race_splits`` slices of deferred races). ``decide``: the split histogram path's (draft ids, draft form,
    way), to decide each request's first drafts before searching (``_split_histogram``)."""
    arrivals = _arrival_counters(batch * num_slots * 2 + batch, device, key)  # (per cell, then per request)
    if no_top_k and _split_search() == "histogram":
        return _split_histogram(arrivals, target_args, request_args, knobs, batch, num_slots, vocab, sides, device,
                                key, race_splits, decide, **common)
    if no_top_k:
        return _split_radix(arrivals, target_args, request_args, knobs, batch, num_slots, vocab, sides, device, key,
                            race_splits, **common)
    scratch = _TruncationScratch.of(batch, num_slots, vocab, device, key, 0, race_splits)
    if prepass:
        slices, slice_groups = _prepass_slices(batch * num_slots * sides, vocab, group_shape["GROUP_ROWS"], device)
        _PREPASS((batch, num_slots, sides * slices),
                 (*scratch.cutoffs, arrivals, *target_args, *request_args, *knobs, vocab, num_slots, slices,
                  slice_groups),
                 num_warps, key, **common, **group_shape)
    return scratch


def _prepass_slices(rows: int, vocab: int, group_rows: int, device: torch.device) -> tuple[int, int]:
    """(programs per row, groups per program) of the prepass: up to enough programs to give every
    multiprocessor a few, each reading whole chunks of the pass (``group_rows`` groups: 256, so at most
    16 programs a 128256-token row) and none fewer than ``_MIN_SLICE_GROUPS`` groups (a few on the CPU,
    to exercise the arrival)."""
    groups = -(-vocab // _GROUP)
    if device.type != "cuda":
        wanted = 3
    else:
        wanted = _cdiv(SPLIT_PROGRAMS_PER_SM * _num_sms(device.index or 0), rows)
        wanted = min(wanted, _cdiv(groups, _MIN_SLICE_GROUPS))
    per_slice = _cdiv(_cdiv(groups, max(wanted, 1)), group_rows) * group_rows
    return _cdiv(groups, per_slice), per_slice


def _verify_truncated(
    *,
    mode: str,
    target_logits: torch.Tensor | None,
    target_probs: torch.Tensor | None,
    draft_token_ids: torch.Tensor,
    num_draft_tokens: torch.Tensor,
    draft_logits: torch.Tensor | None,
    draft_probs: torch.Tensor | None,
    temperatures: torch.Tensor,
    seeds: torch.Tensor,
    positions: torch.Tensor,
    conditional_rates: torch.Tensor,
    top_k: torch.Tensor | None,
    top_p: torch.Tensor | None,
    min_p: torch.Tensor | None,
    truncate_draft_logits: bool,
    logprobs: bool = False,
) -> VerifyResult:
    # the step with truncation given: small batches summarise every row a truncated request may need
    # first (the prepass, each row split across programs), large ones summarise rows inside the step
    # as it reaches them (FUSED); one program per request verifies every request (truncated or not),
    # and in a batch given no top_k it leaves its races over whole rows to the split terminal launch
    # (DEFER, _defers_races)
    step = _Step.of(target_logits, target_probs, draft_logits, draft_probs, draft_token_ids)
    target, target_is_probs, draft, draft_kind, draft_ids = (step.target, step.target_is_probs, step.draft,
                                                             step.draft_kind, step.draft_ids)
    batch, num_slots, vocab = target.shape
    device = target.device
    out, num_emitted, num_accepted = step.result[:3]
    if batch == 0:
        return step.result
    key = _stream_key(device)
    # a batch given no top_k: every truncated row has top_k off, and the split histogram path (or, in the
    # launch variants triton-radix-..., the split radix path) summarises it before the step at any
    # batch size (the step then reads summaries, as on the prepass path);
    # otherwise the prepass (small batches) or the step itself (FUSED)
    no_top_k = top_k is None
    split = _use_split(batch, num_slots, "probabilistic", device)
    fused = not no_top_k and not split
    defer = _defers_races(no_top_k, split, device)
    block, num_warps = _truncation_shape(vocab, device, fused)
    race_block, race_warps = _race_shape(vocab, device, batch)
    race_splits, race_chunk = _slices(batch, vocab, race_block, device) if defer else (0, 0)
    knobs, flags = _knob_args(top_k, top_p, min_p, temperatures)
    truncate_draft = draft_kind == 1 and truncate_draft_logits
    group_shape = _group_shape(vocab, block, fused)
    common = {"MODE": _MODE_IDS[mode], "TARGET_PROBS": target_is_probs, "TRUNCATE_DRAFT": truncate_draft, **flags,
              "PDL": _dependent_launch(batch, device)}
    target_args = (target, target.stride(0), target.stride(1), draft, draft.stride(0), draft.stride(1))
    request_args = (num_draft_tokens, temperatures, seeds, positions)
    # a batch given no top_k decides its requests' first drafts before the search, where it can (_decides)
    way = (_decides(mode, logprobs, draft_kind, truncate_draft, batch, top_p is not None, min_p is not None)
           if no_top_k else None)
    decided = way is not None
    scratch = _summarize(target_args, request_args, knobs, batch, num_slots, vocab, 2 if truncate_draft else 1,
                         device, key, no_top_k=no_top_k, prepass=not fused, num_warps=num_warps,
                         group_shape=group_shape, race_splits=race_splits,
                         decide=(draft_ids, draft_kind, way) if decided else None, **common)
    _TRUNCATED((batch,),
               (out, out.stride(0), num_emitted, num_accepted, *target_args, draft_ids, draft_ids.stride(0),
                *request_args, conditional_rates, *knobs, *scratch.cutoffs, scratch.record_f, scratch.record_i,
                scratch.decided, vocab, num_slots),
               num_warps, key, max_registers=truncated_step_cap(fused, num_warps), DRAFT=draft_kind, BLOCK=block,
               FUSED=fused, DEFER=defer,
               SUMMARIZE_EMITTED=logprobs and mode == "synthetic", DECIDED=decided,
               RACED=bracket_races(way, draft_kind, batch) > 0,
               OUT_BLOCK=_next_power_of_2(num_slots), **common, **group_shape)
    if defer:
        _TRUNCATED_TERMINAL((batch, race_splits),
                            (scratch.record_f, scratch.record_i, scratch.race_f, scratch.race_i,
                             _arrival_counters(batch * num_slots * 2, device, key), out, out.stride(0), num_emitted,
                             *target_args, *request_args, vocab, num_slots, race_splits, race_chunk),
                            race_warps, key, MODE=common["MODE"], DRAFT=draft_kind, TARGET_PROBS=target_is_probs,
                            TRUNCATE_DRAFT=truncate_draft, BLOCK=race_block,
                            S_BLOCK=max(_next_power_of_2(race_splits), 2), PDL=common["PDL"])
    return VerifyResult(out, num_emitted, num_accepted)


@_quiet_under_interpreter
def truncation_summaries(*, target: torch.Tensor, target_is_probs: bool, temperatures: torch.Tensor,
                         num_draft_tokens: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None,
                         min_p: torch.Tensor | None) -> tuple[torch.Tensor, ...]:
    """The summaries alone of target rows (for tests and tools; the split radix or histogram path when
    ``top_k`` is not given, else the prepass): ``(m, S, tau, iota, n)``, each ``[B, K + 1]`` (``n`` the
    kept list's length, 0 for a row a radix or histogram path summarised), written for the rows
    a truncated step reads (rows ``0..n`` of non-greedy requests with a knob on); every other entry is
    what the scratch held."""
    batch, num_slots, vocab = target.shape
    device = target.device
    key = _stream_key(device)
    block, num_warps = _truncation_shape(vocab, device)
    knobs, flags = _knob_args(top_k, top_p, min_p, temperatures)
    zeros = torch.zeros(batch, dtype=torch.int64, device=device)
    target_args = (target, target.stride(0), target.stride(1), target, target.stride(0), target.stride(1))
    scratch = _summarize(target_args, (num_draft_tokens, temperatures, zeros, zeros), knobs, batch, num_slots, vocab,
                         1, device, key, no_top_k=top_k is None, prepass=True, num_warps=num_warps,
                         group_shape=_group_shape(vocab, block), MODE=_MODE_IDS["probabilistic"],
                         TARGET_PROBS=target_is_probs, TRUNCATE_DRAFT=False, **flags)
    fields = scratch.summary_f[:batch * num_slots * 8].view(batch, num_slots, 2, 4)[:, :, 0]
    iota = scratch.summary_i[:batch * num_slots * 2].view(batch, num_slots, 2)[:, :, 0]
    return (fields[..., 0].clone(), fields[..., 1].clone(), fields[..., 2].clone(), iota.clone(),
            fields[..., 3].to(torch.int32))


def _logprobs(result: VerifyResult, *, mode: str, target_logits: torch.Tensor | None,
              target_probs: torch.Tensor | None, num_draft_tokens: torch.Tensor, temperatures: torch.Tensor,
              seeds: torch.Tensor, positions: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None,
              min_p: torch.Tensor | None, raw: bool) -> torch.Tensor:
    # the epilogue (specbench/kernels/logprobs.py): [B, K + 1] float32, after the step's kernels on the
    # same stream (a truncated step's summaries are still in the scratch: only its deferred race ran since, which
    # leaves them alone)
    target = target_logits if target_probs is None else target_probs
    batch, num_slots, vocab = target.shape
    device = target.device
    logprobs = torch.empty((batch, num_slots), dtype=torch.float32, device=device)
    if batch == 0:
        return logprobs
    key = _stream_key(device)
    block, num_warps = _program_shape(vocab, device, *ROW_PROGRAM_SHAPE)
    knobs, flags = _knob_args(top_k, top_p, min_p, temperatures)
    truncate = top_k is not None or top_p is not None or min_p is not None
    summary_f, summary_i = _summaries(batch, num_slots, device, key)
    out = result.output_token_ids
    _LOGPROBS((batch, num_slots),
              (logprobs, logprobs.stride(0), out, out.stride(0), result.num_emitted,
               target, target.stride(0), target.stride(1), num_draft_tokens, temperatures, seeds, positions,
               *knobs, summary_f, summary_i, vocab, num_slots),
              num_warps, key, MODE=_MODE_IDS[mode], TARGET_PROBS=target_probs is not None, RAW=raw,
              TRUNCATE=truncate, BLOCK=block, **flags)
    return logprobs


@_quiet_under_interpreter
def simulate(
    *,
    conditional_rates: torch.Tensor,
    num_requests: int,
    seed: int,
    first_request: int,
    mixture_rates: torch.Tensor | None = None,
) -> torch.Tensor:
    """Drafts accepted per synthetic step; request ``r`` has seed ``request_seed(seed, first_request + r)``.

    ``conditional_rates`` ``[K]`` float32; returns ``[num_requests]`` int32. ``mixture_rates``
    ``[M, K]`` float32 (``M`` a power of two): per-request spread, each request's conditional rates
    are row ``m`` of it (``simulate_acceptance`` gives the rule), and ``conditional_rates`` only sets ``K``.
    """
    counts = torch.empty(num_requests, dtype=torch.int32, device=conditional_rates.device)
    grid = (_cdiv(num_requests, _SIMULATE_BLOCK),)
    if mixture_rates is not None:
        table = mixture_rates.contiguous()
        _simulate_mixture_kernel[grid](
            counts, table, seed, first_request, num_requests, table.shape[1], table.shape[0],
            BLOCK=_SIMULATE_BLOCK,
        )
        return counts
    _simulate_kernel[grid](
        counts, conditional_rates, seed, first_request, num_requests, conditional_rates.numel(),
        BLOCK=_SIMULATE_BLOCK,
    )
    return counts
