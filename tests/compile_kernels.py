"""Lower every kernel variant the Triton launcher can pick to a GPU binary, with no GPU.

Run by ``tests/test_kernels_compile.py`` in a subprocess without ``TRITON_INTERPRET`` (under the
interpreter ``@triton.jit`` gives functions that are never lowered). Prints one JSON line per
variant: kernel, constexprs, warps, logits dtype, the register cap it is launched with (``max_registers``: the
fused truncated step's, ``launch.truncated_step_cap``; else null), cubin bytes, and (where Triton ships cuobjdump)
registers per thread and stack bytes, where ptxas puts registers it could not keep, and counts of PTX instructions
some tests look for. Every variant is compiled as a launch on aligned tensors and sizes specialises it
(``aligned_attributes``). Exits 3 when this Triton has no NVIDIA backend.

Usage: ``python tests/compile_kernels.py [ARCH] [--loops] [--jobs N]`` (ARCH defaults to 90, Hopper:
the H100 and H200 that the committed timings come from). ``--loops`` adds, per variant, the
innermost loops of its SASS with their instruction counts (see ``sass_loops``): the static side
of ``results/kernels-notes.md``. ``--jobs``: compiling processes, one per core by default (the test
suite runs it with one, beside its other tests).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import multiprocessing
import re
import subprocess
import sys
import tempfile
import types
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

from specbench import machine
from specbench.kernels import launch
from specbench.kernels.block import _block_masses_kernel, _block_race_kernel, _block_rows_kernel, _verify_block_kernel
from specbench.kernels.bracket_race import _bracket_race_kernel
from specbench.kernels.draft_bounds import _draft_bounds_kernel
from specbench.kernels.histogram import _split_histogram_kernel
from specbench.kernels.logprobs import _logprobs_kernel
from specbench.kernels.radix import _split_radix_kernel
from specbench.kernels.sequential import _verify_sequential_kernel
from specbench.kernels.split import _split_rows_kernel, _split_terminal_kernel
from specbench.kernels.synthetic import _simulate_kernel, _simulate_mixture_kernel
from specbench.kernels.tree import _tree_finish_kernel, _tree_rows_kernel, _verify_tree_kernel
from specbench.kernels.truncation import (
    _truncated_terminal_kernel,
    _truncation_prepass_kernel,
    _verify_truncated_kernel,
)

# pointer arguments by name (target and draft rows take the logits dtype)
POINTERS = {
    "out_ptr": "*i64", "num_emitted_ptr": "*i32", "num_accepted_ptr": "*i32", "draft_ids_ptr": "*i64",
    "num_draft_ptr": "*i32", "temperature_ptr": "*fp32", "seed_ptr": "*i64", "position_ptr": "*i64",
    "conditional_rates_ptr": "*fp32", "scratch_f_ptr": "*fp32", "scratch_i_ptr": "*i32", "arrivals_ptr": "*i32",
    "counters_ptr": "*i32",
    "top_k_ptr": "*i32", "top_p_ptr": "*fp32", "min_p_ptr": "*fp32", "summary_f_ptr": "*fp32", "summary_i_ptr": "*i32",
    "logprobs_ptr": "*fp32", "group_max_ptr": "*fp32", "group_ids_ptr": "*i32", "list_ids_ptr": "*i32",
    "list_v_ptr": "*fp32", "list_w_ptr": "*fp32", "state_f_ptr": "*fp32", "state_i_ptr": "*i32",
    "part_f_ptr": "*fp32", "part_i_ptr": "*i32", "nodes_ptr": "*i32", "parents_ptr": "*i64", "rates_ptr": "*fp32",
    "record_f_ptr": "*fp32", "record_i_ptr": "*i32", "race_f_ptr": "*fp32", "race_i_ptr": "*i32", "decided_ptr": "*i32",
    "row_max_ptr": "*fp32",
    "counts_ptr": "*i32", "list_f_ptr": "*fp32", "list_i_ptr": "*i32",
}
MODES = {"greedy": 0, "probabilistic": 1, "synthetic": 2}
DRAFTS = (0, 1, 2)  # none, logits, probs
_GPU = types.SimpleNamespace(type="cuda")  # what _launch_shape asks of a device


def variants() -> list[tuple[object, dict[str, int], int, str]]:
    """(kernel, constexprs, warps, logits dtype) for every kernel ``specbench/kernels/launch.py`` launches."""
    out = []
    sizes = {"S_BLOCK": 64, "OUT_BLOCK": 8}
    greedy_shapes = sorted({launch._launch_shape(1 << 17, _GPU, False, "greedy", batch) for batch in (64, 128, 256, 512)})
    for mode, mode_id in MODES.items():
        split_shapes_by_batch = {batch: launch._launch_shape(1 << 17, _GPU, True, mode, batch) for batch in (8, 64, 512)}
        split_shapes = sorted(set(split_shapes_by_batch.values()))
        for draft in DRAFTS if mode == "probabilistic" else (0,):
            sequential = greedy_shapes if mode == "greedy" else [launch._launch_shape(1 << 17, _GPU, False, mode, 256)]
            for target_probs in (0, 1):
                common = {"MODE": mode_id, "DRAFT": draft, "TARGET_PROBS": target_probs}
                inline = launch.decided_at_drafts(mode, bool(target_probs), draft)
                for dtype in ("fp32", "bf16"):
                    if not inline:
                        out.extend((_verify_sequential_kernel, {**common, "BLOCK": block, "OUT_BLOCK": 8, "SCREEN": 1},
                                    warps, dtype) for block, warps in sequential)
                        out.extend((_split_rows_kernel, {**common, "BLOCK": block, **sizes}, warps, dtype)
                                   for block, warps in split_shapes)
                    if mode != "greedy":
                        out.extend((_split_terminal_kernel, {**common, "DECIDE_INLINE": int(inline),
                                                             "SCREEN": int(launch.screened(batch, _GPU)), "BLOCK": block,
                                                             **sizes}, warps, dtype)
                                   for batch, (block, warps) in split_shapes_by_batch.items())
    out.append((_simulate_kernel, {"BLOCK": launch._SIMULATE_BLOCK}, 4, "fp32"))
    out.append((_simulate_mixture_kernel, {"BLOCK": launch._SIMULATE_BLOCK}, 4, "fp32"))
    out.extend(truncation_variants())
    block, warps = launch._program_shape(1 << 17, _GPU, *launch.ROW_PROGRAM_SHAPE)  # block's one-program path
    split_block, split_warps = launch._launch_shape(1 << 17, _GPU, True, "probabilistic", 8)  # its split path at B = 8
    wide_block, wide_warps = launch._launch_shape(1 << 17, _GPU, True, "probabilistic", 256)  # ... and at B = 256
    for draft in DRAFTS:
        for target_probs in (0, 1):
            out.extend((_verify_block_kernel, {"DRAFT": draft, "TARGET_PROBS": target_probs, "BLOCK": block,
                                               "OUT_BLOCK": 8}, warps, dtype) for dtype in ("fp32", "bf16"))
            split = {"DRAFT": draft, "TARGET_PROBS": target_probs, "BLOCK": split_block, "OUT_BLOCK": 8, "S_BLOCK": 64}
            stats = int(not launch.decided_at_drafts("probabilistic", bool(target_probs), draft))
            out.append((_block_rows_kernel, {**split, "STATS": stats}, split_warps, "fp32"))
            out.append((_block_masses_kernel, {**split, "SKIP": 0}, split_warps, "fp32"))
            out.append((_block_race_kernel, {**split, "SCREEN": 0}, split_warps, "fp32"))
            if draft == (2 if target_probs else 1):  # at large batches (skip, screen): both logits, both probabilities
                out.append((_block_masses_kernel, {**split, "BLOCK": wide_block, "SKIP": 1}, wide_warps, "fp32"))
                out.append((_block_race_kernel, {**split, "BLOCK": wide_block, "SCREEN": 1}, wide_warps, "fp32"))
    out.extend(tree_variants())
    return out


def tree_variants() -> list[tuple[object, dict[str, int], int, str]]:
    """The tree kernel at its launch shape (the chain's one-program shape at B = 256) for trees of up to 8 nodes:
    every mode, target and draft form, both candidate rules where they differ (the probabilistic mode), in
    float32, and target and draft logits in bfloat16; the split path's kernels (rows; finish: masses and race) in
    float32."""
    out = []
    for mode, mode_id in MODES.items():
        block, warps = launch._launch_shape(1 << 17, _GPU, False, mode, 256)
        for draft in DRAFTS if mode == "probabilistic" else (0,):
            for target_probs in (0, 1):
                for without in (0, 1) if mode == "probabilistic" else (0,):
                    constexprs = {"MODE": mode_id, "DRAFT": draft, "TARGET_PROBS": target_probs,
                                  "WITHOUT_REPLACEMENT": without, "BLOCK": block, "NODE_BLOCK": 8}
                    widest = mode == "probabilistic" and draft == 1 and not target_probs
                    one_program = {**constexprs, "CAND_GROUPS": min(block // launch.CAND_LANE.value,
                                                                  launch.TREE_CANDIDATE_GROUPS)}
                    out.extend((_verify_tree_kernel, one_program, warps, dtype)
                               for dtype in (("fp32", "bf16") if widest else ("fp32",)))
                    if mode == "synthetic":
                        continue  # the synthetic mode always walks in one program
                    # the split path at B = 8 (its shape there)
                    split_block, split_warps = launch._launch_shape(1 << 17, _GPU, True, mode, 8)
                    split = {**constexprs, "BLOCK": split_block, "S_BLOCK": 64}
                    split["ROW_BLOCK"] = 8
                    out.append((_tree_rows_kernel, split, split_warps, "fp32"))
                    if mode != "greedy":  # with the race from candidates (B = 8), and without (B = 1)
                        out.extend((_tree_finish_kernel, {**split, "CANDIDATES": candidates}, split_warps, "fp32")
                                   for candidates in (1, 0))
    return out


# (mode, draft, truncate_draft, target_probs): the forms whose deferring step (DEFER) is compiled, one for each
# race it leaves (p' without the draft; the residual against q', q and given probabilities; the synthetic mode's)
DEFERRED_FORMS = {("probabilistic", 0, 0, 0), ("probabilistic", 1, 1, 0), ("probabilistic", 1, 0, 0),
                  ("probabilistic", 2, 0, 1), ("synthetic", 0, 0, 0)}


def truncation_variants() -> list[tuple[object, dict[str, int], int, str]]:
    """The truncation prepass, the truncated step (summarising rows itself, FUSED, and from summaries made
    before it; in DEFERRED_FORMS also deferring its races, DEFER, given no top_k), the deferred race's
    terminal launch and the log-probability epilogue: every mode, target and draft form with every knob given
    (the knobs not given only drop loads), one with top_k alone, in float32 (the fused step with its register
    cap, as the launcher launches it), and in bfloat16 the form that
    reads the most rows in it (target and truncated draft logits): bfloat16 changes only the loads, and
    these kernels take 4 to 16 s each to compile, so the rest would take the suite past its budget."""
    block, warps = launch._truncation_shape(1 << 17, _GPU)
    groups = launch._group_shape(1 << 17, block)  # the top-k path's shapes
    fused_block, fused_warps = launch._truncation_shape(1 << 17, _GPU, True)
    fused_groups = launch._group_shape(1 << 17, fused_block, True)
    step_shapes = {0: (block, warps, groups), 1: (fused_block, fused_warps, fused_groups)}
    race_block, race_warps = launch._launch_shape(1 << 17, _GPU, True, "probabilistic", 1)  # the deferred races
    every_knob = {"HAS_TOP_K": 1, "HAS_TOP_P": 1, "HAS_MIN_P": 1}
    out = []
    for mode in ("probabilistic", "synthetic"):
        for draft in DRAFTS if mode == "probabilistic" else (0,):
            for truncate_draft in (0, 1) if draft == 1 else (0,):
                for target_probs in (0, 1):
                    common = {"MODE": MODES[mode], "TARGET_PROBS": target_probs, "TRUNCATE_DRAFT": truncate_draft,
                              **every_knob}
                    widest = mode == "probabilistic" and truncate_draft and not target_probs
                    for dtype in ("fp32", "bf16") if widest else ("fp32",):
                        if draft == 0 or truncate_draft:  # the prepass reads draft rows only with TRUNCATE_DRAFT
                            out.append((_truncation_prepass_kernel, {**common, **groups}, warps, dtype))
                        out.extend((_verify_truncated_kernel, {**common, "DRAFT": draft, "BLOCK": step_block,
                                                               "OUT_BLOCK": 8, "FUSED": fused, "DEFER": 0,
                                                               "SUMMARIZE_EMITTED": int(mode == "synthetic"), "DECIDED": 0,
                                                               "RACED": 0, **step_groups},
                                    step_warps, dtype) for fused, (step_block, step_warps, step_groups) in step_shapes.items())
                        if (mode, draft, truncate_draft, target_probs) in DEFERRED_FORMS and dtype == "fp32":
                            # the step deferring its races (a batch given no top_k, on a GPU)
                            out.append((_verify_truncated_kernel, {**common, "HAS_TOP_K": 0, "DRAFT": draft,
                                                                   "BLOCK": block, "OUT_BLOCK": 8, "FUSED": 0,
                                                                   "DEFER": 1,
                                                                   "SUMMARIZE_EMITTED": int(mode == "synthetic"),
                                                                   "DECIDED": 0, "RACED": 0, **groups}, warps,
                                        dtype))
                        if mode == "probabilistic" and (draft != 1 or truncate_draft) and dtype == "fp32":
                            # and from the split histogram path's decisions (histogram.STEP_DECIDE), deferring
                            # its races (the launcher's own) or not (strategy("sequential")), with the stop rows'
                            # races tried from the first level's bracket (the launcher's) or not (-norace); that
                            # launch for each draft form
                            out.extend((_verify_truncated_kernel, {
                                **common, "HAS_TOP_K": 0, "DRAFT": draft, "BLOCK": block, "OUT_BLOCK": 8,
                                "FUSED": 0, "DEFER": defer, "SUMMARIZE_EMITTED": 0, "DECIDED": 1, "RACED": raced,
                                **groups}, warps, dtype) for defer in ((0, 1) if draft == 1 else (1,))
                                for raced in (1, 0))
                            out.append((_bracket_race_kernel, {
                                "MODE": common["MODE"], "DRAFT": draft, "TARGET_PROBS": target_probs, "HAS_TOP_K": 0,
                                "HAS_TOP_P": 1, "HAS_MIN_P": 1, "SLICE": launch._histogram_shape(1 << 17, _GPU)[0],
                                "BLOCK": launch._histogram_shape(1 << 17, _GPU)[1], "P_BLOCK": 32},
                                launch._histogram_shape(1 << 17, _GPU)[2], dtype))
                        out.append((_truncated_terminal_kernel, {"MODE": common["MODE"], "DRAFT": draft,
                                                                 "TARGET_PROBS": target_probs,
                                                                 "TRUNCATE_DRAFT": truncate_draft, "BLOCK": race_block,
                                                                 "S_BLOCK": 256}, race_warps, dtype))
    top_k_only = {"MODE": 1, "TARGET_PROBS": 0, "TRUNCATE_DRAFT": 1, "HAS_TOP_K": 1, "HAS_TOP_P": 0, "HAS_MIN_P": 0}
    out.append((_truncation_prepass_kernel, {**top_k_only, **groups}, warps, "fp32"))
    out.extend((_verify_truncated_kernel, {**top_k_only, "DRAFT": 1, "BLOCK": step_block, "OUT_BLOCK": 8, "FUSED": fused,
                                           "DEFER": 0, "SUMMARIZE_EMITTED": 0, "DECIDED": 0, "RACED": 0, **step_groups},
                                           step_warps,
                                           "fp32")
               for fused, (step_block, step_warps, step_groups) in step_shapes.items())
    # the split radix path (the launch variants triton-radix-...; batches given no top_k take the histogram
    # path): each step, target logits with truncated draft logits
    slice_, radix_block, radix_warps = launch._radix_shape(1 << 17, _GPU)
    # (digit 1 as a constant, as a launch specialises an integer argument of 1)
    steps = [{"STEP": 0, "FIRST": 0, "LAST": 0}, {"STEP": 1, "FIRST": 1, "LAST": 0},
             {"STEP": 1, "FIRST": 0, "LAST": 0, "digit": 1},
             {"STEP": 1, "FIRST": 0, "LAST": 1}, {"STEP": 2, "FIRST": 0, "LAST": 0}]
    # (target probabilities change only the loads and the masses: their two widest steps)
    # (and with each chunk loaded ahead, the launch variants' -prefetch: the largest value and the widest digits)
    for target_probs, truncate_draft, prefetch, chosen in ((0, 1, 0, steps), (1, 0, 0, steps[1::2]),
                                                           (0, 1, 1, [steps[0], steps[1], steps[3]])):
        out.extend((_split_radix_kernel, {"MODE": 1, "TARGET_PROBS": target_probs, "TRUNCATE_DRAFT": truncate_draft,
                                          "HAS_TOP_K": 0, "HAS_TOP_P": 1, "HAS_MIN_P": 1, **step, "SLICE": slice_,
                                          "BLOCK": radix_block, "P_BLOCK": 32, "PREFETCH": prefetch}, radix_warps,
                    "fp32") for step in chosen)
    # the split histogram path (batches given no top_k): each step (the first, a middle and the
    # last level), target logits with truncated draft logits, and target probabilities (integer distances)
    # but for the finish step (its sorts and the one-program fallback take 13-15 s of a core to compile; with
    # probabilities only its masses differ)
    slice_, hist_block, hist_warps = launch._histogram_shape(1 << 17, _GPU)
    bins = launch.HISTOGRAM_BINS
    # (and with DECIDE, the first level and the decisions, STEP_DECIDE, for each draft form it takes: with target
    # probabilities the draft logits here are left whole, which decides nothing)
    # (and with SKIP_DECIDED, the first launch after draft_bounds.py's decisions, taking the stop rows' largest values
    # from there, BOUNDS_MAX, or reading them again, -noboundsmax)
    plain = {"DECIDE": 0, "SKIP_DECIDED": 0, "BOUNDS_MAX": 0, "DRAFT": 0, "ATOMIC": 0, "FOLD": 0}
    # (with FOLD, the first level with DECIDE takes the decisions too, for each draft form: the launch variants -fold)
    hist_steps = [{"STEP": 0, "FIRST": 0, "LAST": 0, **plain},
                  *({"STEP": 0, "FIRST": 0, "LAST": 0, **plain, "SKIP_DECIDED": 1, "BOUNDS_MAX": bounds_max}
                    for bounds_max in (1, 0)),
                  {"STEP": 1, "FIRST": 1, "LAST": 0, **plain},
                  {"STEP": 1, "FIRST": 0, "LAST": 0, **plain}, {"STEP": 1, "FIRST": 0, "LAST": 1, **plain},
                  {"STEP": 2, "FIRST": 0, "LAST": 0, **plain}, {"STEP": 3, "FIRST": 0, "LAST": 0, **plain},
                  {"STEP": 1, "FIRST": 1, "LAST": 0, **plain, "DECIDE": 1},
                  *({"STEP": 4, "FIRST": 0, "LAST": 0, **plain, "DECIDE": 1, "DRAFT": draft} for draft in (0, 1, 2)),
                  *({"STEP": 1, "FIRST": 1, "LAST": 0, **plain, "DECIDE": 1, "FOLD": 1, "DRAFT": draft}
                    for draft in (0, 1, 2))]
    out.extend((_split_histogram_kernel, {"MODE": 1, "TARGET_PROBS": target_probs, "TRUNCATE_DRAFT": 1 - target_probs,
                                          "HAS_TOP_K": 0, "HAS_TOP_P": 1, "HAS_MIN_P": 1, **step, "SLICE": slice_,
                                          "BLOCK": hist_block, "BINS": bins, "BINS_SHIFT": bins.bit_length() - 1,
                                          "CAP": launch.HISTOGRAM_CAP, "P_BLOCK": 32, "SLICES_PER_PROGRAM": 1,
                                          "ROWS": 0, "ROW_BLOCK": 8, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS),
                                          "PREDICATED_SUMS": int(launch.HISTOGRAM_PREDICATED_SUMS)},
                hist_warps, "fp32")
               for target_probs in (0, 1) for step in hist_steps
               if not (target_probs and (step["STEP"] == 3 or step["DRAFT"] == 1)))
    # a middle level given no min_p (top_p alone: no in-play test for logits), and given no min_p the first level (with
    # DECIDE too: the mass before the draft) and the gather, whose masses only summed take rows.exp_in_sum, each also
    # with tl.exp (the launch variants' -noftz, or -ftz)
    middle = next(constexprs for kernel, constexprs, _w, _d in out if kernel is _split_histogram_kernel
                  and constexprs["STEP"] == 1 and not constexprs["FIRST"] and not constexprs["LAST"]
                  and not constexprs["TARGET_PROBS"])
    out.append((_split_histogram_kernel, {**middle, "HAS_MIN_P": 0}, hist_warps, "fp32"))
    summing = [constexprs for kernel, constexprs, _w, _d in out if kernel is _split_histogram_kernel
               and constexprs["STEP"] in (1, 2) and not constexprs["LAST"]
               and not constexprs["TARGET_PROBS"] and (constexprs["FIRST"] or constexprs["STEP"] == 2)]
    out.extend((_split_histogram_kernel, {**constexprs, "HAS_MIN_P": 0, "FTZ_SUMS": ftz}, hist_warps, "fp32")
               for constexprs in summing for ftz in (0, 1))
    out.append((_split_histogram_kernel, {**middle, "HAS_MIN_P": 0, "FTZ_SUMS": 1 - middle["FTZ_SUMS"]}, hist_warps,
                "fp32"))
    # the masses summed the other way (the launch variants -pred / -nopred), given no min_p: the first level, a middle
    # level, the last one (by tl.histogram, and by atomics below) and the gather from logits, each also as the
    # launcher's later launches take rows (below)
    first, last = (next(constexprs for kernel, constexprs, _w, _d in out if kernel is _split_histogram_kernel
                        and constexprs["STEP"] == 1 and constexprs[which] and not constexprs["DECIDE"]
                        and not constexprs["TARGET_PROBS"]) for which in ("FIRST", "LAST"))
    out.extend((_split_histogram_kernel, {**constexprs, "HAS_MIN_P": 0,
                                          "PREDICATED_SUMS": 1 - constexprs["PREDICATED_SUMS"]}, hist_warps, "fp32")
               for constexprs in (first, middle, last, next(c for c in summing if c["STEP"] == 2)))
    # the last level counted by atomics (the launcher's own; `plain` above is the launch variants' -noatomic), and
    # a middle level taking four slices a program (-slices4)
    # (the last level for target logits and probabilities: their parts are computed apart)
    out.extend((_split_histogram_kernel, {**constexprs, "ATOMIC": 1}, hist_warps, "fp32")
               for kernel, constexprs, _w, _d in list(out) if kernel is _split_histogram_kernel
               and constexprs["STEP"] == 1 and constexprs["LAST"])
    out.append((_split_histogram_kernel, {**middle, "SLICES_PER_PROGRAM": 4}, hist_warps, "fp32"))
    # each program taking its slice of every row of its request, or of its request's stop row, or of the rows after it
    # (the launcher's ways after decisions from the bounds): the launches the search makes then, target logits with
    # truncated draft logits and target probabilities
    per_cell = [constexprs for kernel, constexprs, _w, _d in out if kernel is _split_histogram_kernel
                and constexprs["SLICES_PER_PROGRAM"] == 1
                and constexprs["STEP"] in (0, 1, 2, 3) and not constexprs["DECIDE"]
                and (constexprs["STEP"] != 0 or constexprs["SKIP_DECIDED"])
                and (constexprs["STEP"] != 1 or not constexprs["LAST"] or constexprs["ATOMIC"])]
    # (the rows after the stop at the launcher's slices a program)
    out.extend((_split_histogram_kernel, {**constexprs, "ROWS": rows,
                                          "SLICES_PER_PROGRAM": launch.HISTOGRAM_AFTER_SLICES if rows == 3 else 1},
                hist_warps, "fp32")
               for rows in (1, 2, 3) for constexprs in per_cell)
    # the other parts a level of 64, 128 and 256 than the launcher's (the launch variants -bins64, -bins128, -bins256):
    # the first level, and the last one counted by atomics, at each
    so_far = list(out)
    out.extend((_split_histogram_kernel, {**constexprs, "BINS": more, "BINS_SHIFT": more.bit_length() - 1}, hist_warps,
                "fp32")
               for more in (64, 128, 256) for kernel, constexprs, _w, _d in so_far if kernel is _split_histogram_kernel
               and more != constexprs["BINS"]
               and constexprs["STEP"] == 1 and not constexprs["DECIDE"]
               and constexprs["SLICES_PER_PROGRAM"] == 1 and constexprs["ROWS"] == 0
               and (constexprs["FIRST"] or (constexprs["LAST"] and constexprs["ATOMIC"])))
    # target probabilities with truncated draft logits: their first level and decisions
    probs_first = next(constexprs for kernel, constexprs, _w, _d in out if kernel is _split_histogram_kernel
                       and constexprs["STEP"] == 1 and constexprs["FIRST"] and constexprs["DECIDE"]
                       and constexprs["TARGET_PROBS"])
    out.extend((_split_histogram_kernel, {**probs_first, "TRUNCATE_DRAFT": 1, **step}, hist_warps, "fp32")
               for step in ({}, {"STEP": 4, "FIRST": 0, "DRAFT": 1}))
    # the decisions from one pass's bounds before the search (draft_bounds.py): the sums, target logits and
    # probabilities (a draft row's sums are the target logits' code), and the decisions for each draft form
    bounds_slice, bounds_block, bounds_warps = launch._bounds_shape(1 << 17, _GPU)
    bounds = {"MODE": 1, "HAS_TOP_K": 0, "HAS_TOP_P": 1, "HAS_MIN_P": 1, "SLICE": bounds_slice, "BLOCK": bounds_block,
              "PREFETCH": 1, "P_BLOCK": 16, "ROW_MAX_STRIDE": 8, "FTZ_SUMS": int(launch.HISTOGRAM_FTZ_SUMS),
              "PREDICATED_SUMS": int(launch.HISTOGRAM_PREDICATED_SUMS), "FOLD": 0}
    # (and in rounds, one per slot: target logits with truncated draft logits)
    out.extend((_draft_bounds_kernel, {**bounds, "DRAFT": draft, "TARGET_PROBS": target_probs, "STEP": step,
                                       "ROUNDS": rounds}, bounds_warps if step == 0 else 1, "fp32")
               for target_probs in (0, 1) for step in (0, 1) for draft in ((1,) if step == 0 else (0, 1, 2))
               for rounds in ((0, 1) if not target_probs and draft == 1 else (0,)))
    # (the sums by tl.exp: the launch variants' -noftz)
    out.append((_draft_bounds_kernel, {**bounds, "DRAFT": 1, "TARGET_PROBS": 0, "STEP": 0, "ROUNDS": 1,
                                       "FTZ_SUMS": 1 - bounds["FTZ_SUMS"]}, bounds_warps, "fp32"))
    # (the sums above a depth and ahead of the draft added the other way, from logits and from probabilities: the launch
    # variants -pred / -nopred)
    out.extend((_draft_bounds_kernel, {**bounds, "DRAFT": 1, "TARGET_PROBS": target_probs, "STEP": 0,
                                       "ROUNDS": 1 - target_probs,
                                       "PREDICATED_SUMS": 1 - bounds["PREDICATED_SUMS"]}, bounds_warps, "fp32")
               for target_probs in (0, 1))
    # (each request's decision taken by its last program of the pass, as the launcher's up to DECISION_FOLD_MAX_BATCH
    # requests, or by a launch after it: the launch variants -fold / -nofold; the sums with the decisions for each
    # draft form, and in rounds)
    out.extend((_draft_bounds_kernel, {**bounds, "DRAFT": draft, "TARGET_PROBS": target_probs, "STEP": 0,
                                       "ROUNDS": rounds, "FOLD": 1 - bounds["FOLD"]}, bounds_warps, "fp32")
               for target_probs, draft, rounds in ((0, 0, 0), (0, 1, 0), (0, 2, 0), (1, 0, 0), (1, 1, 0), (1, 2, 0),
                                                   (0, 1, 1)))
    # each kernel of a truncated step as a dependent launch (dependent_launch.py; the launcher's up to
    # DEPENDENT_LAUNCH_MAX_BATCH requests, the launch variants -pdl): its first variant above with PDL, and the fused
    # step's and the radix path's loads ahead (their loops the furthest from the wait)
    dependent = (_truncation_prepass_kernel, _split_radix_kernel, _split_histogram_kernel, _draft_bounds_kernel,
                 _bracket_race_kernel, _verify_truncated_kernel, _truncated_terminal_kernel)
    firsts = [next(variant for variant in out if variant[0] is kernel) for kernel in dependent]
    firsts += [next(variant for variant in out if variant[0] is _verify_truncated_kernel and variant[1].get("FUSED")),
               next(variant for variant in out if variant[0] is _split_radix_kernel and variant[1].get("PREFETCH"))]
    out.extend((kernel, {**constexprs, "PDL": 1}, warps, dtype) for kernel, constexprs, warps, dtype in firsts)
    block, warps = launch._program_shape(1 << 17, _GPU, *launch.ROW_PROGRAM_SHAPE)  # the log-probability epilogue
    for mode in ("greedy", "probabilistic"):
        for target_probs in (0, 1):
            for raw in (0, 1):
                for truncate in (0, 1) if mode == "probabilistic" else (0,):
                    flags = every_knob if truncate else {"HAS_TOP_K": 0, "HAS_TOP_P": 0, "HAS_MIN_P": 0}
                    out.append((_logprobs_kernel, {"MODE": MODES[mode], "TARGET_PROBS": target_probs, "RAW": raw,
                                                   "TRUNCATE": truncate, **flags, "BLOCK": block}, warps, "fp32"))
    return out


def signature(kernel, constexprs: dict[str, int], dtype: str) -> dict[str, str]:
    sig = {}
    for name in inspect.signature(kernel.fn).parameters:
        if name in constexprs:
            sig[name] = "constexpr"
        elif name in ("target_ptr", "draft_ptr"):
            sig[name] = "*" + dtype
        elif name.endswith("_ptr"):
            sig[name] = POINTERS[name]
        else:
            sig[name] = "i64" if name in ("seed", "first_request") else "i32"  # sizes and strides; seeds are 64-bit
    return sig


# integer arguments a launch on real shapes (V = 128256 or 151936, contiguous rows) finds divisible by 16
ALIGNED_INTEGERS = {"V", "CHUNK", "target_stride_b", "target_stride_k", "draft_stride_b", "draft_stride_k"}


def aligned_attributes(names: list[str], sig: dict[str, str]) -> dict[tuple[int], list[list]]:
    """What Triton assumes when it launches on aligned tensors and sizes: every pointer and the
    sizes and strides above divisible by 16 (so the compiled loops are the ones a GPU runs)."""
    return {(i,): [["tt.divisibility", 16]] for i, name in enumerate(names)
            if sig[name].startswith("*") or name in ALIGNED_INTEGERS}


def _cuda_tool(name: str) -> Path | None:
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name
    return tool if tool.exists() else None


def resources(cubin: Path) -> dict[str, int]:
    """Registers per thread and stack bytes (register spills) from cuobjdump; empty if it is not shipped."""
    tool = _cuda_tool("cuobjdump")
    if tool is None:
        return {}
    usage = subprocess.run([str(tool), "--dump-resource-usage", str(cubin)], check=True, capture_output=True,
                           text=True).stdout
    return {key.lower(): int(value) for key, value in re.findall(r"\b(REG|STACK):(\d+)", usage)}


def acquire_loads(ptx: str) -> int:
    """Loads with acquire semantics (``ld.global...acquire``): a waiting program's read of a published state
    (``split.wait_until``). An atomic add of 0 whose value goes unread compiles to nothing at all, acquire or not."""
    return len(re.findall(r"\bld\.global(?:\.\w+)*\.acquire\b", ptx))


def grid_dependency_controls(ptx: str) -> int:
    """How many griddepcontrol instructions (the wait for the launch before, the signal to the launch after:
    dependent_launch.py) the PTX holds."""
    return len(re.findall(r"\bgriddepcontrol\.(?:wait|launch_dependents)\b", ptx))


def memory_before_grid_wait(ptx: str) -> int | None:
    """How many memory instructions other than parameter loads come before the PTX's first griddepcontrol.wait
    (None without one): a dependent launch reads and writes nothing before it (dependent_launch.py)."""
    wait = ptx.find("griddepcontrol.wait")
    if wait < 0:
        return None
    before = ptx[ptx.find(".entry"):wait]
    return sum(not op.startswith("ld.param") for op in re.findall(r"\b(?:ld|st|atom|red|cp\.async)\.[\w.:]+", before))


def fused_shuffles(ptx: str) -> int:
    """FMAs that take a value another thread sent (a butterfly shuffle's result).

    In a sum across threads every thread of a pair must add the same two rounded values. When the
    compiler fuses a thread's own product into that add (fma(a, b, partner)) while the partner adds the
    rounded product, the threads end with totals that differ in the last bit, and a later layout change
    through shared memory keeps whichever thread wrote last (racecheck reports it). Sums of products
    go through ``rounded_product`` to prevent it; this count must stay 0.
    """
    shuffled = set(re.findall(r"shfl\.sync\.bfly\.b32\s+(%r\d+),", ptx))
    fmas = re.findall(r"fma\.rn\.f32\s+%r\d+,\s*(%r\d+),\s*(%r\d+),\s*(%r\d+);", ptx)
    return sum(any(operand in shuffled for operand in operands) for operands in fmas)


def innermost_loops(cubin: Path) -> list[list[str]]:
    """The innermost loops of the SASS (a backward branch whose body holds no other one), each as its
    instructions' opcodes in order (with their modifiers); none where cuobjdump is missing."""
    tool = _cuda_tool("cuobjdump")
    if tool is None:
        return []
    sass = subprocess.run([str(tool), "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    code = [(int(address, 16), text) for address, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    index = {address: i for i, (address, _text) in enumerate(code)}
    spans = []
    for i, (address, text) in enumerate(code):
        branch = re.search(r"\bBRA\b[^0-9]*(0x[0-9a-f]+)", text)
        if branch and int(branch.group(1), 16) < address and int(branch.group(1), 16) in index:
            spans.append((index[int(branch.group(1), 16)], i))
    innermost = [(a, b) for a, b in spans if not any(a <= c and d <= b and (c, d) != (a, b) for c, d in spans)]
    return [[text.split()[1] if text.startswith("@") else text.split()[0] for _a, text in code[first:last + 1]]
            for first, last in innermost]


def sass_loops(cubin: Path) -> list[dict[str, int]]:
    """The innermost loops of the SASS (``innermost_loops``).

    Per loop: instructions per iteration, global loads, MUFU (exp2, log2, rcp) and local-memory
    (spill) instructions. With BLOCK tokens and W warps per program, one iteration handles
    BLOCK / (32 W) tokens per thread.
    """
    return [{
        "instructions": len(ops),
        "global_loads": sum(op.startswith("LDG") for op in ops),
        "mufu": sum(op.startswith("MUFU") for op in ops),
        "local_memory": sum(op.startswith(("LDL", "STL")) for op in ops),
    } for ops in innermost_loops(cubin)]


def compile_variant(index: int, arch: int = 90):
    """Variant ``index`` of ``variants()`` lowered for compute capability ``arch``: (its row of variants(),
    Triton's compiled kernel)."""
    kernel, constexprs, warps, dtype = variant = variants()[index]
    return variant, compile_kernel(kernel, constexprs, warps, dtype, arch, register_cap(kernel, constexprs, warps))


def compile_kernel(kernel, constexprs: dict, warps: int, dtype: str, arch: int = 90,
                   max_registers: int | None = None):
    """Triton's compiled ``kernel`` (any ``@triton.jit`` kernel, another version's too) at these constexprs, warps and
    row dtype, launched on aligned tensors, for compute capability ``arch``, with ``maxnreg`` where given."""
    parameters = inspect.signature(kernel.fn).parameters
    names = list(parameters)
    # (a constexpr the variant leaves out takes its default, as the launcher's launches give it)
    constexprs = {**{name: p.default for name, p in parameters.items()
                     if p.annotation is triton.language.constexpr and p.default is not inspect.Parameter.empty},
                  **constexprs}
    sig = signature(kernel, constexprs, dtype)
    source = triton.compiler.ASTSource(
        fn=kernel, signature=sig, constexprs={(names.index(name),): value for name, value in constexprs.items()},
        attrs=aligned_attributes(names, sig),
    )
    options = {"num_warps": warps} if max_registers is None else {"num_warps": warps, "maxnreg": max_registers}
    return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)


def first_loop(kernel, constexprs: dict, warps: int, dtype: str = "fp32", arch: int = 90) -> tuple[list[str], int | None]:
    """The first innermost SASS loop of ``kernel`` compiled as ``compile_kernel`` compiles it (its opcodes, as
    ``innermost_loops`` gives them), and its registers a thread; an IndexError where cuobjdump is missing (no
    loops then)."""
    compiled = compile_kernel(kernel, constexprs, warps, dtype, arch)
    with tempfile.TemporaryDirectory() as workdir:
        cubin = Path(workdir) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        return innermost_loops(cubin)[0], resources(cubin).get("reg")


_SUMMING_LEVELS = {(1, 1, 0): "first level", (1, 0, 0): "middle level", (1, 0, 1): "last level", (2, 0, 0): "gather"}


def summing_passes() -> list[tuple[str, object, dict, int]]:
    """For results scripts: the passes over a row that sum masses, each once, as ``variants()`` builds them at the
    launcher's parts a level and last-level counting, given ``top_p`` alone (``HAS_MIN_P`` 0): the split histogram
    path's first, middle and last levels and gather from target logits, and the bounds pass's sums from target
    logits (in rounds) and from target probabilities; each as (what, kernel, constexprs, warps)."""
    chosen, seen = [], set()
    for kernel, constexprs, warps, _dtype in variants():
        what = None
        if kernel is _split_histogram_kernel and not constexprs["TARGET_PROBS"] \
                and constexprs["SLICES_PER_PROGRAM"] == 1 and constexprs["ROWS"] == 0 and not constexprs["DECIDE"] \
                and constexprs["BINS"] == launch.HISTOGRAM_BINS \
                and (not (constexprs["STEP"] == 1 and constexprs["LAST"])
                     or constexprs["ATOMIC"] == int(launch.HISTOGRAM_ATOMIC)):
            what = _SUMMING_LEVELS.get((constexprs["STEP"], constexprs["FIRST"], constexprs["LAST"]))
        elif kernel is _draft_bounds_kernel and constexprs["STEP"] == 0 \
                and (constexprs["TARGET_PROBS"] or constexprs["ROUNDS"]):
            what = f"bounds pass, sums, target {'probabilities' if constexprs['TARGET_PROBS'] else 'logits'}"
        if what is not None and what not in seen:
            seen.add(what)
            chosen.append((what, kernel, {**constexprs, "HAS_MIN_P": 0}, warps))
    return chosen


def print_loops_both_ways(what: str, kernel, constexprs: dict, warps: int, flag: str, kinds: int = 5) -> None:
    """For a results script: ``kernel``'s first innermost loop with the constexpr ``flag`` 0 and 1, a line each
    (instructions an iteration, registers, the ``kinds`` commonest opcodes), then its instructions a token both ways
    (``BLOCK`` tokens a program of ``warps`` warps, an iteration's tokens a thread)."""
    tokens = constexprs["BLOCK"] // (32 * warps)
    counts = []
    for value in (0, 1):
        loop, registers = first_loop(kernel, {**constexprs, flag: value}, warps)
        common = collections.Counter(op.split(".")[0] for op in loop).most_common(kinds)
        counts.append(len(loop))
        print(f"{what}, {flag} {value}: {len(loop)} instructions an iteration ({tokens} tokens a thread), "
              f"registers {registers}; {', '.join(f'{op} {n}' for op, n in common)}")
    print(f"{what}: {counts[0] / tokens:.1f} -> {counts[1] / tokens:.1f} instructions a token")


def register_cap(kernel, constexprs: dict, warps: int) -> int | None:
    """The register cap the launcher launches a variant with (``maxnreg``): the fused truncated step's, else none."""
    if kernel is not _verify_truncated_kernel:
        return None
    return launch.truncated_step_cap(bool(constexprs.get("FUSED")), warps)


def _compile(index: int, arch: int, with_loops: bool) -> dict:
    # one variant, by its place in variants(): a worker process rebuilds the list rather than unpickle kernels
    (kernel, constexprs, warps, dtype), compiled = compile_variant(index, arch)
    with tempfile.TemporaryDirectory() as workdir:
        cubin = Path(workdir) / "kernel.cubin"
        cubin.write_bytes(compiled.asm["cubin"])
        row = {"kernel": kernel.fn.__name__, "constexprs": constexprs, "num_warps": warps, "dtype": dtype,
               "max_registers": register_cap(kernel, constexprs, warps), "cubin_bytes": cubin.stat().st_size,
               "fused_shuffles": fused_shuffles(compiled.asm["ptx"]),
               "acquire_loads": acquire_loads(compiled.asm["ptx"]),
               "grid_dependency_controls": grid_dependency_controls(compiled.asm["ptx"]),
               "memory_before_grid_wait": memory_before_grid_wait(compiled.asm["ptx"]),
               **resources(cubin)}
        if with_loops:
            row["loops"] = sass_loops(cubin)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description="Lower every kernel variant to a GPU binary, with no GPU.")
    parser.add_argument("arch", nargs="?", type=int, default=90, help="compute capability, 90 (Hopper) by default")
    parser.add_argument("--loops", action="store_true", help="add each variant's innermost SASS loops")
    parser.add_argument("--jobs", type=int, default=machine.cpu_count(), help="compiling processes (default: one "
                        "per core)")
    args = parser.parse_args()
    if "nvidia" not in triton.backends.backends:
        print("this Triton has no NVIDIA backend", file=sys.stderr)
        return 3
    # a variant compiles in about half a second of one core: rows come back in the order of variants()
    compile_one = partial(_compile, arch=args.arch, with_loops=args.loops)
    with contextlib.ExitStack() as stack:
        mapper = map
        if args.jobs > 1:
            mapper = stack.enter_context(ProcessPoolExecutor(args.jobs, mp_context=multiprocessing.get_context("spawn"))).map
        for row in mapper(compile_one, range(len(variants()))):
            print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
