"""Run every Triton kernel path under compute-sanitizer on hostile inputs; exit non-zero on any report.

Needs a CUDA GPU and NVIDIA's ``compute-sanitizer`` on the PATH. Usage::

    python tests/sanitize_kernels.py [--out DIR] [--tools memcheck,initcheck,racecheck]

For each tool it runs this file again as ``--workload`` under ``compute-sanitizer --tool TOOL``,
with torch's caching allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``), so every tensor is an
allocation of its own: initcheck then sees a kernel that reads memory nothing wrote even where
a cached block would hold an earlier tensor's bytes. Each tool's full log goes to
``DIR/sanitize-TOOL.log``; the summary (one line per tool: its error count and how many kernel
launches it checked) is printed and written to ``DIR/sanitize-summary.txt``. Exit status 0 when
every tool reports 0 errors, 1 when any reports one, 2 when it cannot run here.

The workload (``--workload``) calls ``specbench.verify(backend="triton", check_values=False)`` for
every mode, draft form and target form, with each launch strategy forced (one program per
request, the vocabulary split) and the launcher's own choice, in float32 and bfloat16, on inputs
built to reach the edges: draft ids of -1, ``V`` and beyond, rows of NaN, of ``-inf`` and with
``+inf`` entries, ragged draft counts including 0 and counts out of range, temperature-0
(greedy) requests mixed with sampled ones, negative, NaN and +inf temperatures, target probabilities
with negative, above-1 and NaN entries and rows with no mass, draft-logit rows with no finite
value, ``K = 0``, a vocabulary of one token, and the sweep's simulation kernel; then truncation and
log-probabilities on the same inputs with ties (``truncation_knobs``: knobs in range, off and out of
range, per request), with and without truncated draft logits, the same knobs without ``top_k`` (the
split histogram path, or the radix path with ``--split-search radix``) and ``top_p`` alone, and log-probabilities alone. Each
call runs twice, the second through the launcher's direct path to the compiled kernel. ``--part lists`` runs only the
split histogram path on rows whose candidates fill its lists at every sort length and past their capacity
(``crowded_inputs``).
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

# the checkout's specbench, however the script is started (the workload runs it again as a subprocess)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

TOOLS = ("memcheck", "initcheck", "racecheck")
# memcheck and initcheck end with "ERROR SUMMARY: N errors", racecheck with "RACECHECK SUMMARY: N hazards
# displayed (E errors, W warnings)": a report is any error or warning
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) error|RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warn")


def hostile_inputs(batch: int, num_spec: int, vocab: int, draft: str, target: str, dtype, seed: int) -> dict:
    """``specbench.verify`` keyword arguments on the CPU that reach every edge the contract names."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, num_spec + 1, vocab, generator=generator) * 3
    rows = num_spec + 1
    logits[0, 0, :] = math.nan  # a row with no finite value: invalid
    logits[1 % batch, :, vocab // 2] = math.inf  # +inf entries share the mass
    logits[2 % batch, 1 % rows, :] = -math.inf
    logits[3 % batch, :, 0] = math.nan
    drafts = logits[:, :num_spec].nan_to_num(nan=-math.inf).argmax(dim=-1)  # mostly accepted
    if num_spec:
        drafts[::5, 0] = -1
        drafts[1::5, -1] = vocab
        drafts[2::7, num_spec // 2] = vocab + 1000
        drafts[3::7, 0] = -7
    counts = torch.arange(batch, dtype=torch.int32) % (num_spec + 2) - (torch.arange(batch) % 11 == 10).int()
    # sampled, greedy, invalid (negative, NaN) requests side by side, every kind from a batch of 4 on, and
    # from a batch of 5 a temperature of +inf (a uniform law over the finite values: inv_temperature = 0)
    temperatures = torch.tensor([(1.0, 0.0, -1.0, math.nan, math.inf, 1.3, 0.0, 0.5)[b % 8] for b in range(batch)])
    kwargs = {"draft_token_ids": drafts, "num_draft_tokens": counts, "temperatures": temperatures,
              "seeds": torch.arange(batch) * 3 + seed, "positions": torch.arange(batch) % 5}
    if target == "probs":
        probs = torch.softmax(logits.nan_to_num(nan=-math.inf, posinf=80.0), dim=-1).nan_to_num(nan=0.0)
        probs[0, -1, :3] = torch.tensor([-0.5, 1.5, math.nan])[:vocab]  # negative, above 1, NaN
        probs[1 % batch, 0, :] = 0.0  # no mass
        probs[2 % batch, -1, 1 % vocab] = math.inf
        kwargs["target_probs"] = probs.to(dtype)
    else:
        kwargs["target_logits"] = logits.to(dtype)
    if draft != "none" and num_spec:
        draft_logits = logits[:, :num_spec] + torch.randn(batch, num_spec, vocab, generator=generator)
        draft_logits[1 % batch, 0, :] = -math.inf  # no finite value: a one-hot draft
        draft_logits[2 % batch, -1, 3 % vocab] = math.nan
        if draft == "logits":
            kwargs["draft_logits"] = draft_logits.to(dtype)
        else:
            draft_probs = torch.softmax(draft_logits.nan_to_num(nan=-math.inf), dim=-1).nan_to_num(nan=0.0)
            draft_probs[0, 0, 2 % vocab] = math.nan
            kwargs["draft_probs"] = draft_probs.to(dtype)
    return kwargs


def truncation_knobs(batch: int, vocab: int) -> dict:
    """``SamplingParams`` keyword arguments on the CPU: per request, knobs in range, off (0, 1, 0,
    ``top_k >= V``) and out of range (negative ``top_k``, NaN and non-positive ``top_p``, NaN, negative
    and above-1 ``min_p``), so the requests of a hostile batch meet many combinations."""
    import torch

    top_k = [0, 1, 3, vocab, vocab + 5, -2, 2, 64]  # 1, 2, 3, 64: the prepass's top_k fast path
    top_p = [1.0, 0.5, math.nan, 0.0, -1.0, 0.9, 1.0, 0.999]
    min_p = [0.0, 0.1, math.nan, 1.5, -1.0, 0.01, 0.3, 0.0]
    return {"top_k": torch.tensor([top_k[b % 8] for b in range(batch)], dtype=torch.int32),
            "top_p": torch.tensor([top_p[(b // 2) % 8] for b in range(batch)]),
            "min_p": torch.tensor([min_p[(b // 3) % 8] for b in range(batch)])}


# the candidates of each request's rows in crowded_inputs: the split histogram path's finish sorts a list of at most
# 128, 256, 512 or 1,024 at that length (histogram._finish), and a list over 1,024 (launch.HISTOGRAM_CAP) falls back
# to one program's search
CROWDS = (100, 200, 400, 800, 1500)


def crowded_inputs(num_spec: int, vocab: int, draft: str, target: str, crowds=CROWDS, seed: int = 0) -> dict:
    """``specbench.verify`` keyword arguments on the CPU (``sampling`` among them: ``top_p`` alone) whose rows each
    hold a crowd of tied tokens where their ``top_p`` boundary falls: request ``b``'s rows one token of logit 8, then
    ``crowds[b]`` tokens tied at 2 (mass ``e**-6`` each against the first's 1), the rest at about -20, and ``top_p``
    three quarters through the crowd's mass (past the shorter sort lengths: a list of 200 cut at its 150th). The
    split histogram path's last level keeps the crowd's part alone, so each row's list holds the crowd: sorted at
    the length that holds it, or past the list's capacity searched by one program. Draft rows (``draft`` "logits"
    or "probs") are built alike; drafts are crowd members, the first token or a tail token, in turn."""
    import torch

    from specbench import SamplingParams

    generator = torch.Generator().manual_seed(seed)
    batch = len(crowds)
    assert vocab > max(crowds) + 1
    logits = torch.randn(batch, num_spec + 1, vocab, generator=generator) - 20.0
    top_p = []
    for b, crowd in enumerate(crowds):
        for r in range(num_spec + 1):
            ids = torch.randperm(vocab, generator=generator)
            logits[b, r, ids[0]] = 8.0
            logits[b, r, ids[1:crowd + 1]] = 2.0
        mass = crowd * math.exp(-6.0)
        top_p.append((1.0 + 0.75 * mass) / (1.0 + mass))
    rows = logits[:, :num_spec]
    picks = [rows[b, i].argsort(descending=True)[(0, 1, vocab - 1)[(b + i) % 3]] for b in range(batch)
             for i in range(num_spec)]
    drafts = torch.stack(picks).view(batch, num_spec) if num_spec else torch.zeros(batch, 0, dtype=torch.int64)
    kwargs = {"draft_token_ids": drafts, "num_draft_tokens": torch.full((batch,), num_spec, dtype=torch.int32),
              "seeds": torch.arange(batch) + seed, "positions": torch.zeros(batch, dtype=torch.int64),
              "sampling": SamplingParams(temperatures=torch.ones(batch), top_p=torch.tensor(top_p))}
    if target == "probs":
        kwargs["target_probs"] = torch.softmax(logits.double(), dim=-1).float()
    else:
        kwargs["target_logits"] = logits
    if draft == "logits":
        kwargs["draft_logits"] = rows.clone()
    elif draft == "probs":
        kwargs["draft_probs"] = torch.softmax(rows.double(), dim=-1).float()
    return kwargs


# (batch, K, V) of the chain workloads: ragged and odd vocabularies, a 70001-token row, K = 0, V = 1
CHAIN_SHAPES = [(5, 3, 4099), (3, 2, 70001), (70, 4, 2053), (2, 0, 513), (4, 2, 1)]


def _groups(mine, modes):
    """(mode, draft, target, dtype) of each group of calls this shard runs, in the workload's order: every
    draft form in the probabilistic mode (none elsewhere), target logits and probabilities, float32 and
    bfloat16. ``mine`` is asked once per group, owned or not, so shards split every part alike."""
    import torch

    for mode in modes:
        for draft in (("none", "logits", "probs") if mode == "probabilistic" else ("none",)):
            for target in ("logits", "probs"):
                for dtype in (torch.float32, torch.bfloat16):
                    if mine():
                        yield mode, draft, target, dtype


def truncation_units(mine, part: str, by_shape: bool = False):
    """(mode, draft, target, dtype, shapes) of each group of truncated calls this shard runs, in the workload's
    order; ``mine`` is asked once per group, or with ``by_shape`` once per (group, shape), so that a shard may take one
    shape of a group (the float32 groups run every shape, bfloat16 the first only). Rows of 70001 tokens are left
    out (the radix fallback's ~25 passes over them under the sanitizers took minutes)."""
    import torch

    shapes = [shape for shape in CHAIN_SHAPES if shape[2] != 70001]
    shapes += [(2, 2, 131101)] if part == "topk" else []
    modes = {"all": ("probabilistic", "synthetic", "greedy"), "truncation": ("probabilistic", "synthetic", "greedy"),
             "radix": ("probabilistic",), "topk": ("probabilistic",)}.get(part, ())
    for mode, draft, target, dtype in _groups((lambda: True) if by_shape else mine, modes):
        group_shapes = shapes[:1] if dtype == torch.bfloat16 else shapes
        taken = [shape for shape in group_shapes if mine()] if by_shape else group_shapes
        if taken:
            yield mode, draft, target, dtype, taken


def workload(part: str = "all", shard: tuple[int, int] = (1, 1), by_shape: bool = False) -> int:
    """Every kernel path on hostile inputs (``part="truncation"``: the truncation and log-probability
    kernels and the simulations only); prints one line per group of calls. ``shard = (i, n)`` runs
    groups ``i, i + n, ...`` of them (counting from 1), so n processes share the work."""
    import torch

    group = 0

    def mine() -> bool:
        nonlocal group
        group += 1
        return (group - 1) % shard[1] == shard[0] - 1

    from specbench import SamplingParams, simulate_acceptance, verify
    from specbench.kernels import launch

    device = torch.device("cuda")
    calls = 0
    for mode, draft, target, dtype in _groups(mine, ("greedy", "probabilistic", "synthetic") if part == "all" else ()):
        for batch, num_spec, vocab in CHAIN_SHAPES:
            kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, dtype, seed=batch + vocab)
            kwargs = {k: v.to(device) for k, v in kwargs.items()}
            if mode == "synthetic":
                kwargs["acceptance_rates"] = [0.9, 0.6, 0.5, 0.2][:num_spec]
            for strategy in launch.STRATEGIES:
                with launch.strategy(strategy):
                    for _ in range(2):  # the JIT launch, then the direct one
                        verify(mode=mode, backend="triton", check_values=False, **kwargs)
                        calls += 1
        torch.cuda.synchronize()
        print(f"{mode} draft={draft} target={target} {str(dtype).removeprefix('torch.')}: ok", flush=True)
    # truncation (the prepass, the truncated step) and the log-probability epilogue: logits rounded to a
    # grid so ties cross the top_k and top_p boundaries, V not a multiple of the block, top_k >= V
    # (no 70001-token rows here: 4099 tokens still span several blocks and groups, and bfloat16 runs on the first
    # shape only; part "topk": the calls given top_k, probabilistic, with one more shape: rows of 4097 groups, where
    # the fused step's group block is 8192)
    for mode, draft, target, dtype, shapes in truncation_units(mine, part, by_shape):
        for batch, num_spec, vocab in shapes:
            kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, dtype, seed=batch + vocab)
            if "target_logits" in kwargs:
                kwargs["target_logits"] = (kwargs["target_logits"].float() * 2).round().div(2).to(dtype)
            kwargs = {k: v.to(device) for k, v in kwargs.items()}
            if mode == "synthetic":
                kwargs["acceptance_rates"] = [0.9, 0.6, 0.5, 0.2][:num_spec]
            knobs = {k: v.to(device) for k, v in truncation_knobs(batch, vocab).items()}
            sampling = SamplingParams(temperatures=kwargs.pop("temperatures"), **knobs)
            # "split": the prepass summarises the rows first; "sequential": the step does (FUSED)
            for strategy in ("split", "sequential") if part != "radix" else ():
                with launch.strategy(strategy):
                    for truncate_draft, logprobs in ((True, "processed"), (False, "raw")):
                        for _ in range(2):  # the JIT launch, then the direct one
                            verify(mode=mode, backend="triton", check_values=False, sampling=sampling,
                                   truncate_draft_logits=truncate_draft, logprobs=logprobs, **kwargs)
                            calls += 1
                            if part != "topk":
                                verify(mode=mode, backend="triton", check_values=False, logprobs=logprobs,
                                       temperatures=sampling.temperatures, **kwargs)  # logprobs alone
                                calls += 1
            # a batch given no top_k: a split path (histogram.py, or radix.py) summarises its rows; the
            # step races itself ("sequential") or leaves its races over whole rows to the split terminal ("split")
            # (and top_p alone once, split: kernels compiled without min_p's in-play test); without
            # log-probabilities the histogram path first decides drafts and skips rows, after its first level
            # (histogram.STEP_DECIDE, way 1) or from one pass's bounds (draft_bounds.py, way 2), forced at every
            # batch size here; after the bounds, its programs take the rows of a request the launcher's way, and
            # its stop row then the rows after it (histogram.ROWS_AT_STOP, ROWS_AFTER_STOP: rows 2, those after at
            # the launcher's slices a program, leaving at once where the request stopped clean; (2, 2): at two)
            no_top_k = SamplingParams(temperatures=sampling.temperatures, top_p=sampling.top_p, min_p=sampling.min_p)
            top_p_alone = SamplingParams(temperatures=sampling.temperatures, top_p=sampling.top_p)
            for strategy, knobs, logprobs, way, rows, after in (
                    ("split", no_top_k, "processed", 1, None, None),
                    ("sequential", no_top_k, "processed", 1, None, None),
                    ("split", top_p_alone, "processed", 1, None, None), ("split", no_top_k, None, 1, None, None),
                    ("sequential", top_p_alone, None, 1, None, None), ("split", no_top_k, None, 2, None, None),
                    ("split", no_top_k, None, 2, 2, None), ("split", no_top_k, None, 2, 2, 2),
                    ("sequential", top_p_alone, None, 2, None, None)) if part != "topk" else ():
                with _histogram_tuned(way, rows, after), launch.strategy(strategy):
                    for _ in range(2):  # the JIT launch, then the direct one
                        verify(mode=mode, backend="triton", check_values=False, sampling=knobs,
                               truncate_draft_logits=True, logprobs=logprobs, **kwargs)
                        calls += 1
        torch.cuda.synchronize()
        print(f"truncated {mode} draft={draft} target={target} {str(dtype).removeprefix('torch.')}"
              + (f" shapes {shapes}" if by_shape else "") + ": ok", flush=True)
    calls += _lists_workload(mine, device, folded_only=part == "folds") if part in ("lists", "folds") else 0
    calls += _tree_workload(mine, device) if part in ("all", "trees") else 0
    calls += _block_workload(mine, device) if part in ("all", "block") else 0
    counts, simulated = torch.zeros(4, dtype=torch.int64), False
    if part not in ("trees", "block", "topk", "lists", "folds") and mine():
        simulated = True
        counts = simulate_acceptance([0.9, 0.7, 0.3], 5000, seed=3, backend="triton", device=device)
        counts += simulate_acceptance([0.9, 0.7, 0.3], 5000, seed=3, backend="triton", device=device,
                                      request_rates=[0.2, 0.5, 0.8, 0.95])  # per-request spread
    torch.cuda.synchronize()
    simulation = f" and one simulation ({int(counts.sum())} accepted drafts)" if simulated else ""
    print(f"workload done: {calls} verify calls{simulation}", flush=True)
    return 0


@contextlib.contextmanager
def _histogram_tuned(way: int | None, rows: int | None, after: int | None, race: int | None = None,
                     fold: int | None = None) -> Iterator[None]:
    """Inside a ``with`` block, the split histogram path decides drafts the launch variants' way ``way`` (``None``:
    the launcher's), its programs take rows the way ``rows``, the rows after a stop ``after`` slices a program,
    each clean stop races from the bracket after level ``race`` and, ``fold``, each request's decisions are taken
    by its last program of the launch before them (``launch.TUNING``); the launcher's own after."""
    from specbench.kernels import launch

    settings = {"histogram_decide": way, "histogram_rows": rows, "histogram_after_slices": after,
                "histogram_race": race, "decision_fold": fold}
    launch.TUNING.update(settings)
    try:
        yield
    finally:
        launch.TUNING.update(dict.fromkeys(settings))


def _lists_workload(mine, device, folded_only: bool = False) -> int:
    """The split histogram path's finish on lists of every sort length and past the list's capacity (crowded_inputs:
    rows of 4,099 tokens whose top_p boundary falls in a crowd of 100 to 1,500 tied tokens), float32, every draft
    and target form, with truncated draft logits; every row searched (log-probabilities, and no drafts decided
    first), and the drafts decided first from one pass's bounds (the search's programs taking the rows the launcher's
    way, and each request's stop row then the rows after it, at the launcher's and two slices a program; each clean
    stop's race from the bracket after the first level and after the second, whatever the launcher's level for the
    form or the batch), and decided after the first level with the race after it (small batches' way,
    ``launch.HISTOGRAM_SMALL_BATCH_DECIDE``), and both ways with each request's decisions taken by its last program
    of the launch before them (``launch.DECISION_FOLD_MAX_BATCH``, the launch variants' ``-fold``); ``folded_only``:
    those two ways alone (part "folds")."""
    import torch

    from specbench import verify
    from specbench.kernels import launch

    calls = 0
    for _mode, draft, target, dtype in _groups(mine, ("probabilistic",)):
        if dtype != torch.float32:
            continue
        kwargs = crowded_inputs(3, 4099, draft, target, seed=7)
        sampling = kwargs.pop("sampling")
        kwargs = {k: v.to(device) for k, v in kwargs.items()}
        sampling = sampling._replace(temperatures=sampling.temperatures.to(device), top_p=sampling.top_p.to(device))
        for strategy, logprobs, way, rows, after, race, fold in (
                ("split", "processed", 0, None, None, None, None), ("sequential", None, 0, None, None, None, None),
                ("split", None, 2, None, None, None, None), ("split", None, 2, 2, None, None, None),
                ("split", None, 2, 2, 2, None, None), ("split", None, 2, None, None, 1, None),
                ("split", None, 2, None, None, 2, None), ("split", None, 1, None, None, 1, None),
                ("split", None, 2, None, None, None, 1), ("split", None, 1, None, None, 1, 1)):
            if folded_only and fold is None:
                continue
            with _histogram_tuned(way, rows, after, race, fold), launch.strategy(strategy):
                for _ in range(2):  # the JIT launch, then the direct one
                    verify(mode="probabilistic", backend="triton", check_values=False, sampling=sampling,
                           truncate_draft_logits=True, logprobs=logprobs, **kwargs)
                    calls += 1
        torch.cuda.synchronize()
        print(f"lists draft={draft} target={target} float32: ok", flush=True)
    return calls


# trees of the tree workload by node count: a bushy tree, a chain and a 2x2 (the kernel's lanes: 8, 4, 8)
TREES = {7: [-1, -1, -1, 0, 3, 3, 5], 4: [-1, 0, 1, 2], 6: [-1, -1, 0, 0, 1, 1], 0: []}


def _tree_workload(mine, device) -> int:
    """The tree kernels on hostile inputs (one program per request, and the split path): every mode, draft and
    target form, both candidate rules, float32 and bfloat16, with ragged counts, absent and out-of-range drafts,
    invalid rows and requests, and parents left unchecked (out of range past and within the counts); a tree of
    no nodes and a vocabulary of 1."""
    import torch

    from specbench import verify
    from specbench.kernels import launch
    from specbench.trees import DraftTree

    calls = 0
    shapes = [(5, 7, 4099), (70, 6, 2053), (3, 4, 70001), (2, 0, 513), (4, 4, 1)]
    for mode, draft, target, dtype in _groups(mine, ("greedy", "probabilistic", "synthetic")):
        for batch, num_nodes, vocab in shapes:
            kwargs = hostile_inputs(batch, num_nodes, vocab, draft, target, dtype, seed=batch + vocab)
            parents = torch.tensor([TREES[num_nodes]] * batch, dtype=torch.int64).reshape(batch, num_nodes)
            if num_nodes:
                parents[1::3, -1] = num_nodes + 5  # a later parent: the node belongs to no one
                parents[2::3, 1] = -9
            kwargs = {k: v.to(device) for k, v in kwargs.items()}
            if mode == "synthetic":
                kwargs["acceptance_rates"] = [[0.9, 0.5, 0.3], [0.6, 0.4, 0.2]]
            for candidates in ("independent", "without_replacement") if mode == "probabilistic" else ("independent",):
                tree = DraftTree(parents.to(device), candidates)
                for strategy in ("sequential", "split"):  # one program per request; the split path
                    with launch.strategy(strategy):
                        for _ in range(2):  # the JIT launch, then the direct one
                            verify(mode=mode, backend="triton", check_values=False, tree=tree, **kwargs)
                            calls += 1
        torch.cuda.synchronize()
        print(f"tree {mode} draft={draft} target={target} {str(dtype).removeprefix('torch.')}: ok", flush=True)
    return calls


def _block_workload(mine, device) -> int:
    """Block verification (``method="block"``) on hostile inputs, one program per request and the split path:
    every draft and target form, float32 and bfloat16, the chain shapes of the main workload. Every 8th request
    from the 6th drafts a random token in slot 0, so weights fall in (0, 1) for every draft form and the backward
    pass meets rows whose test ``u_{i-1} >= w_i`` fails unread (their mass partials neither written nor read). The
    split path runs twice: as the launcher takes it at these batch sizes, and skipping rows below a passed stop test
    (BLOCK_SKIP_MIN_BATCH, from 256 requests by default)."""
    import torch

    from specbench import verify
    from specbench.kernels import launch

    calls = 0
    for _mode, draft, target, dtype in _groups(mine, ("probabilistic",)):
        for batch, num_spec, vocab in CHAIN_SHAPES:
            kwargs = hostile_inputs(batch, num_spec, vocab, draft, target, dtype, seed=batch + vocab)
            if num_spec:
                drafts = kwargs["draft_token_ids"]
                drafts[5::8, 0] = torch.randint(vocab, drafts[5::8, 0].shape, generator=torch.Generator().manual_seed(vocab))
            kwargs = {k: v.to(device) for k, v in kwargs.items()}
            # one program per request; the split path, and the split path skipping rows below a passed stop test
            default = launch.BLOCK_SKIP_MIN_BATCH
            for strategy, skip_from in (("sequential", default), ("split", default), ("split", 1)):
                with launch.strategy(strategy), mock.patch.object(launch, "BLOCK_SKIP_MIN_BATCH", skip_from):
                    for _ in range(2):  # the JIT launch, then the direct one
                        verify(mode="probabilistic", method="block", backend="triton", check_values=False, **kwargs)
                        calls += 1
        torch.cuda.synchronize()
        print(f"block draft={draft} target={target} {str(dtype).removeprefix('torch.')}: ok", flush=True)
    return calls


def sanitize(out: Path, tools: list[str], part: str = "all", shard: str = "1/1", shape: str | None = None,
             split_search: str | None = None, histogram_variants: bool = False, by_shape: bool = False,
             dependent_launch: bool = False) -> int:
    """Run the workload under each tool; 0 when every tool reports nothing, 1 otherwise."""
    sanitizer = shutil.which("compute-sanitizer")
    if sanitizer is None:
        print("compute-sanitizer is not on the PATH (it ships with the CUDA toolkit)", file=sys.stderr)
        return 2
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("TRITON_INTERPRET", None)
    lines, failed = [], False
    for tool in tools:
        log = out / f"sanitize-{tool}.log"
        command = [sanitizer, "--tool", tool, "--error-exitcode", "99", "--print-limit", "50"]
        if tool == "memcheck":
            command += ["--leak-check", "no"]
        command += [sys.executable, str(Path(__file__).resolve()), "--workload", "--part", part, "--shard", shard]
        command += ["--shape", shape] if shape else []
        command += ["--split-search", split_search] if split_search else []
        command += ["--histogram-variants"] if histogram_variants else []
        command += ["--by-shape"] if by_shape else []
        command += ["--dependent-launch"] if dependent_launch else []
        with log.open("w") as handle:
            done = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env, check=False)
        text = log.read_text(errors="replace")
        found = _SUMMARY.findall(text)
        errors = sum(int(count or 0) for count in found[-1]) if found else None
        launches = "workload done:" in text
        ok = done.returncode == 0 and errors == 0 and launches
        failed = failed or not ok
        detail = f"{errors} errors" if errors is not None else "no error summary"
        lines.append(f"{tool}: {'clean' if ok else 'REPORTED'} ({detail}, exit {done.returncode}; "
                     f"workload {'finished' if launches else 'did not finish'}; log {log.name})")
        print(lines[-1], flush=True)
    (out / "sanitize-summary.txt").write_text("\n".join(lines) + "\n")
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("sanitize-logs"), help="folder for the logs and summary")
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated compute-sanitizer tools")
    parser.add_argument("--workload", action="store_true", help="run the kernels (what the tools watch)")
    parser.add_argument("--part", choices=("all", "truncation", "topk", "radix", "lists", "folds", "trees",
                                                 "block"),
                        default="all",
                        help="truncation: only the truncation and log-probability kernels and the simulations; "
                             "topk: only the truncated calls given top_k (the prepass and the fused step), "
                             "probabilistic, with rows of 4097 groups too; "
                             "radix: only the truncated calls given no top_k (the split paths), probabilistic; "
                             "lists: only the split histogram path on rows whose candidates fill lists of every "
                             "sort length and more (crowded_inputs); folds: only the lists part's calls with each "
                             "request's decisions folded into the launch before them; "
                             "trees: only the tree kernels; block: only block verification's")
    parser.add_argument("--split-search", choices=("radix", "histogram"), default=None,
                        help="how a batch given no top_k searches its cutoffs (launch.TUNING's split_search; "
                             "default: the launcher's own)")
    parser.add_argument("--histogram-variants", action="store_true",
                        help="the split histogram path as its launch variants -noatomic and -slices2 run it (its "
                             "last level counted by tl.histogram, two slices a program)")
    parser.add_argument("--shard", default="1/1", help="I/N: run every N-th group of calls from the I-th (1-based)")
    parser.add_argument("--by-shape", action="store_true",
                        help="count each shape of a group of truncated calls as a group of its own for --shard "
                             "(part radix: 31 groups, the float32 ones four each)")
    parser.add_argument("--dependent-launch", action="store_true",
                        help="every launch of a truncated step a dependent launch, at any batch (launch.TUNING's "
                             "dependent_launch, the launch variants' -pdl; Hopper and later)")
    parser.add_argument("--shape", default=None,
                        help="BLOCKxWARPS: launch every kernel at this shape (launch.TUNING, which also launches "
                             "the truncated fused step without its register cap), e.g. 512x4 for rows of many chunks")
    args = parser.parse_args()
    try:
        index, count = (int(part) for part in args.shard.split("/"))
        assert 1 <= index <= count
    except (ValueError, AssertionError):
        print(f"--shard takes I/N with 1 <= I <= N, got {args.shard!r}", file=sys.stderr)
        return 2
    if args.shape:
        try:
            block, warps = (int(part) for part in args.shape.split("x"))
        except ValueError:
            print(f"--shape takes BLOCKxWARPS such as 2048x8, got {args.shape!r}", file=sys.stderr)
            return 2
        if args.workload:
            from specbench.kernels import launch

            launch.TUNING.update(block=block, num_warps=warps)
    if args.workload:
        if args.split_search:
            from specbench.kernels import launch

            launch.TUNING["split_search"] = ("radix", "histogram").index(args.split_search)
        if args.histogram_variants:
            from specbench.kernels import launch

            launch.TUNING.update(histogram_atomic=0, histogram_slices_per_program=2)
        if args.dependent_launch:
            from specbench.kernels import launch

            launch.TUNING["dependent_launch"] = 1
        return workload(args.part, (index, count), args.by_shape)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: the kernels' memory checks need one", file=sys.stderr)
        return 2
    tools = [tool.strip() for tool in args.tools.split(",") if tool.strip()]
    unknown = [tool for tool in tools if tool not in TOOLS]
    if unknown or not tools:
        print(f"--tools takes some of {', '.join(TOOLS)}, got {args.tools!r}", file=sys.stderr)
        return 2
    return sanitize(args.out, tools, args.part, args.shard, args.shape, args.split_search, args.histogram_variants,
                    args.by_shape, args.dependent_launch)


if __name__ == "__main__":
    sys.exit(main())
