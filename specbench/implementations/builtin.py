"""specbench's own implementations: the torch reference, the Triton kernels, and forced launch variants."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from typing import Any

import torch

from specbench.errors import SpecbenchError
from specbench.implementations.contract import Implementation
from specbench.methods import METHODS
from specbench.verification import VerifyResult, prepare_verify


def _backend(backend: str) -> Callable[[dict[str, Any]], Callable[[], VerifyResult]]:
    def prepare(kwargs: dict[str, Any]) -> Callable[[], VerifyResult]:
        # the public entry point's checks run once here; the step itself is the backend's call
        backend_verify, checked = prepare_verify(**kwargs, backend=backend)
        return lambda: backend_verify(**checked)

    return prepare


def _triton_unavailable(device: torch.device) -> str | None:
    return "Triton is not installed" if importlib.util.find_spec("triton") is None else None


def _dependent_launch_unavailable(device: torch.device) -> str | None:
    # a variant forcing dependent launches: Triton, and on a CUDA device one of compute capability 9.0 or later
    # (the interpreter never takes them, so a CPU run is the launcher's other launches)
    capability = torch.cuda.get_device_capability(device) if device.type == "cuda" else None
    if capability is not None and capability < (9, 0):
        major, minor = capability
        return f"dependent launches need a GPU of compute capability 9.0 or later, this one has {major}.{minor}"
    return _triton_unavailable(device)


def _triton_variant(strategy: str | None, **tuning: int | None):
    """``prepare`` of a Triton launch variant: the strategy (None: the launcher's own) and the launch
    shapes (``launch.TUNING`` entries) are forced inside each call only (a context around the call), so
    variants timed in one process never leak into each other."""

    def prepare(kwargs: dict[str, Any]) -> Callable[[], VerifyResult]:
        from specbench.kernels import launch

        call = _backend("triton")(kwargs)

        def run() -> VerifyResult:
            saved = dict(launch.TUNING)
            launch.TUNING.update({name: None for name in saved} | tuning)  # the rest: the launcher's own
            try:
                with launch.strategy(strategy or "auto"):
                    return call()
            finally:
                launch.TUNING.update(saved)

        return run

    return prepare


_SHAPE_NAME = re.compile(r"triton-(sequential|split)-(\d+)x(\d+)(?:-chunk(\d+))?")
_TREE_NAME = re.compile(r"triton-tree(?:-finish([1-9]\d*))?(-cand|-nocand)?")
_RADIX_NAME = re.compile(r"triton-radix-(\d+)x(\d+)x(\d+)(-prefetch)?")
_HISTOGRAM_BINS = (16, 32, 64, 128, 256)  # parts a level the histogram path takes (launch._histogram_levels)
_HISTOGRAM_NAME = re.compile(r"triton-histogram-(\d+)x(\d+)x(\d+)(?:-bins([1-9]\d*))?(-nodecide|-decide|-bounds)?"
                             r"(?:(\d+)x(\d+)x(\d+))?(-rounds|-norounds)?(-atomic|-noatomic)?(?:-slices([1-9]\d*))?"
                             r"(-percell|-perrequest|-stoprow)?(?:-after([1-9]\d*))?(-boundsmax|-noboundsmax)?"
                             r"(?:-levels([1-6]))?(-ftz|-noftz)?(-pred|-nopred)?(-race[1-6]|-norace)?(-fold|-nofold)?"
                             r"(-pdl|-nopdl)?")
_DEPENDENT_LAUNCH_NAME = re.compile(r"triton-(pdl|nopdl)")


# what -pdl / -nopdl (and triton-pdl / triton-nopdl) add to a variant's description
_DEPENDENT_LAUNCH_WORDS = {None: "", 1: ", every launch of a truncated step a dependent launch at any batch",
                           0: ", no launch of a truncated step a dependent launch"}


def _slice_shape(name: str, slice_: int, block: int, warps: int) -> None:
    # a split search's (tokens of a row per program, per chunk, warps), or a SpecbenchError
    if block < 128 or block > 16384 or block & (block - 1) or slice_ % block:
        raise SpecbenchError(f"{name}: tokens per chunk must be a power of two from 128 to 16384 and divide "
                             f"the tokens per program, got {slice_} x {block}")
    if warps not in (1, 2, 4, 8, 16, 32) or warps * 32 > block:
        raise SpecbenchError(f"{name}: warps per program must be 1, 2, 4, 8, 16 or 32 and at most chunk / 32, "
                             f"got {warps}")


def launch_variant(name: str) -> Implementation | None:
    """The Triton launch variant a name like ``triton-sequential-4096x16`` or ``triton-split-2048x8-chunk32768``
    spells (kernel shape, tokens per block x warps per program, most tokens a split program reads of a row),
    or ``triton-radix-4096x1024x8`` (batches given top_p or min_p without top_k search their cutoffs by the
    split radix path instead of the split histogram path, at that many tokens of a row per program, per
    chunk, and warps; ``-prefetch``: its passes load each chunk one iteration ahead), or
    ``triton-histogram-4096x1024x4`` (the split histogram path at that shape; ``-bins32``: parts per level,
    16 to 256; ``-levels2`` (last in the name): that many levels instead of as many as bring a part to 1/256 nat;
    ``-nodecide``: every row a step may read searched, none of its drafts decided first; ``-decide``: drafts decided
    after the search's first level, ``-bounds``: from one pass's bounds before the search, each at any batch size,
    where the launcher decides as ``HISTOGRAM_DECIDE_MIN_BATCH`` and ``HISTOGRAM_SMALL_BATCH_DECIDE`` say;
    ``-bounds16384x1024x4``: that pass at this many tokens of a row per program, per chunk, and warps; ``-rounds`` /
    ``-norounds``: that pass in one round per slot, or all slots at once, at any batch; ``-atomic`` / ``-noatomic``:
    its last level counts its window's tokens by atomics, or by ``tl.histogram`` as the levels before it do;
    ``-slices4``: each of its programs takes four slices of a row in turn; ``-perrequest`` / ``-percell``: each
    program takes its slice of every row of its request in turn, or one program per row and slice, at any batch and decision way, where the
    launcher takes the first after decisions from the bounds at small batches; ``-stoprow``: after decisions from the
    bounds, one program per request and slice for its stop row, then one per request for the rows after it where it
    did not stop clean, at any batch (the launcher takes it from ``HISTOGRAM_STOP_ROW_MIN_BATCH``), the latter's
    programs taking ``HISTOGRAM_AFTER_SLICES`` slices each and leaving at once where their request stopped clean
    (``-stoprow-after4``: four slices a program); ``-boundsmax`` / ``-noboundsmax``:
    after decisions from the bounds, the largest value of each row searched at a request's stop taken from that
    pass, or read again; ``-ftz`` / ``-noftz`` (after ``-levelsN``): the masses of logits that the bounds pass, the
    levels and the gather only sum taken by one instruction that flushes results below 2**-126 to zero (the
    launcher's, ``HISTOGRAM_FTZ_SUMS``), or by ``tl.exp``: the same sums either way; ``-pred`` / ``-nopred`` (last):
    the sums of masses above a bound (the bounds pass's, and the later levels' and the gather's before the window from
    logits without min_p) add each mass by a compare and a predicated add, or by a select and an add, and the first
    level its mass in play with no test, or with one (the launcher's ``HISTOGRAM_PREDICATED_SUMS``): the same sums to
    the bit either way); ``-race2`` / ``-norace``: where drafts were decided first, the race at each request's
    clean stop tried from the second level's bracket before the levels after it (``-race1``: the first's;
    ``bracket_race.py``; the launcher's ``launch.bracket_races``, by draft form and batch), or left to the whole
    search; ``-fold`` / ``-nofold``: where drafts are decided first, each request's decisions taken by its last
    program to arrive of the launch before them (the bounds pass, or the first level), or by a launch of their own
    (the launcher folds up to ``launch.DECISION_FOLD_MAX_BATCH`` requests); ``-pdl`` / ``-nopdl`` (last): every
    launch of a truncated step a dependent launch (``dependent_launch.py``) at any batch, or none (the launcher's up
    to ``launch.DEPENDENT_LAUNCH_MAX_BATCH`` requests)), or ``triton-pdl`` / ``triton-nopdl`` (the same on the
    launcher's own paths), or ``triton-tree-finish64-cand``
    (the split paths forced; the tree's finish kernel at most 64 slices of a row a request, where the launcher takes
    ``TREE_FINISH_MAX_SLICES``; ``-cand`` / ``-nocand``: the race after a place's two rejected children from the
    masses' candidates, or by its own pass, at any batch, where the launcher takes candidates from
    ``TREE_CANDIDATES_MIN_BATCH``; either part alone, ``triton-tree-finish64`` or ``triton-tree-cand``),
    None for a name of another form; a shape Triton cannot launch is a ``SpecbenchError``."""
    radix = _RADIX_NAME.fullmatch(name)
    if radix is not None:
        slice_, block, warps = (int(group) for group in radix.groups()[:3])
        prefetch = radix.group(4) is not None
        _slice_shape(name, slice_, block, warps)
        return _triton(name, f"Triton, the split radix path (batches given top_p or min_p without top_k) at "
                             f"{slice_} tokens of a row per program, {block} x {warps} warps"
                             + (", each chunk loaded one iteration ahead" if prefetch else ""),
                       _triton_variant(None, split_search=0, radix_slice=slice_, radix_block=block,
                                       radix_warps=warps, radix_prefetch=int(prefetch)))
    histogram = _HISTOGRAM_NAME.fullmatch(name)
    if histogram is not None:
        slice_, block, warps = (int(group) for group in histogram.groups()[:3])
        bins = int(histogram.group(4)) if histogram.group(4) else None
        decide = {None: None, "-nodecide": 0, "-decide": 1, "-bounds": 2}[histogram.group(5)]
        _slice_shape(name, slice_, block, warps)
        bounds = tuple(int(group) for group in histogram.groups()[5:8]) if histogram.group(6) else (None,) * 3
        rounds = {None: None, "-rounds": 1, "-norounds": 0}[histogram.group(9)]
        atomic = {None: None, "-atomic": 1, "-noatomic": 0}[histogram.group(10)]
        per_program = int(histogram.group(11)) if histogram.group(11) else None
        rows = {None: None, "-percell": 0, "-perrequest": 1, "-stoprow": 2}[histogram.group(12)]
        after = int(histogram.group(13)) if histogram.group(13) else None
        bounds_max = {None: None, "-noboundsmax": 0, "-boundsmax": 1}[histogram.group(14)]
        levels = int(histogram.group(15)) if histogram.group(15) else None
        ftz_sums = {None: None, "-noftz": 0, "-ftz": 1}[histogram.group(16)]
        predicated_sums = {None: None, "-nopred": 0, "-pred": 1}[histogram.group(17)]
        race = {None: None, "-norace": 0}.get(histogram.group(18)) if histogram.group(18) in (None, "-norace") else int(
            histogram.group(18)[len("-race"):])
        fold = {None: None, "-nofold": 0, "-fold": 1}[histogram.group(19)]
        dependent = {None: None, "-nopdl": 0, "-pdl": 1}[histogram.group(20)]
        if levels is not None:
            from specbench.kernels import launch

            parts = bins or launch.HISTOGRAM_BINS
            if parts ** levels > 2 ** 24:
                raise SpecbenchError(f"{name}: parts ** levels must be at most 2**24 (the finest part the distances "
                                     f"resolve), got {parts} ** {levels}")
        if per_program is not None and not 2 <= per_program <= 16:
            raise SpecbenchError(f"{name}: -slicesN takes 2 to 16 slices a program, got {per_program}")
        if (bounds[0] is not None or rounds is not None) and decide != 2:
            raise SpecbenchError(f"{name}: a shape and -rounds / -norounds follow -bounds only")
        if after is not None and rows != 2:
            raise SpecbenchError(f"{name}: -after{after} follows -stoprow only")
        if after is not None and after > 16:
            raise SpecbenchError(f"{name}: -afterN takes 1 to 16 slices a program, got {after}")
        if rows == 2 and decide in (0, 1):
            raise SpecbenchError(f"{name}: -stoprow takes the stops that decisions from the bounds say, not "
                                 f"{histogram.group(5)}")
        if bounds[0] is not None:
            _slice_shape(name, *bounds)
        if bins is not None and bins not in _HISTOGRAM_BINS:
            raise SpecbenchError(f"{name}: parts per level must be one of {', '.join(map(str, _HISTOGRAM_BINS))}, "
                                 f"got {bins}")
        return _triton(name, f"Triton, the split histogram path (batches given top_p or min_p without top_k) at "
                             f"{slice_} tokens of a row per program, {block} x {warps} warps"
                             + (f", {bins} parts a level" if bins else "")
                             + {None: "", 0: ", every row searched (no drafts decided first)",
                                1: ", drafts decided first at any batch (after the search's first level)",
                                2: ", drafts decided first at any batch (from one pass's bounds"
                                   + (f" at {bounds[0]} tokens of a row per program, {bounds[1]} x {bounds[2]} warps"
                                      if bounds[0] else "")
                                   + {None: "", 1: ", one round per slot", 0: ", every slot at once"}[rounds] + ")"}[decide]
                             + {None: "", 1: ", the last level counted by atomics",
                                0: ", the last level counted by tl.histogram"}[atomic]
                             + (f", {per_program} slices a program" if per_program else "")
                             + {None: "", 0: ", one program a row and slice",
                                1: ", each program its slice of every row of its request",
                                2: ", each program its slice of its request's stop row, then of the rows after "
                                   "it"}[rows]
                             + (f" ({after} slice{'s' if after > 1 else ''} a program for the rows after, leaving at "
                                f"once where the request stopped clean)" if after else "")
                             + {None: "", 1: ", the stop rows' largest values from the bounds pass",
                                0: ", the stop rows' largest values read again"}[bounds_max]
                             + (f", {levels} levels" if levels else "")
                             + {None: "", 1: ", the masses only summed by an exp that flushes below 2**-126",
                                0: ", the masses only summed by tl.exp"}[ftz_sums]
                             + {None: "", 1: ", the masses above a bound added by predicated adds",
                                0: ", the masses above a bound added by a select and an add"}[predicated_sums]
                             + ("" if race is None else f", the stop row's race tried after level {race}" if race
                                else ", the stop row's race after the whole search")
                             + {None: "", 1: ", each request's decisions by its last program of the launch before them",
                                0: ", each request's decisions by a launch of their own"}[fold]
                             + _DEPENDENT_LAUNCH_WORDS[dependent],
                       _triton_variant(None, split_search=1, histogram_slice=slice_, histogram_block=block,
                                       histogram_warps=warps, histogram_bins=bins,
                                       histogram_decide=decide, bounds_slice=bounds[0], bounds_block=bounds[1],
                                       bounds_warps=bounds[2], bounds_rounds=rounds, histogram_atomic=atomic,
                                       histogram_slices_per_program=per_program, histogram_rows=rows,
                                       histogram_after_slices=after,
                                       histogram_levels=levels, histogram_bounds_max=bounds_max,
                                       histogram_ftz_sums=ftz_sums, histogram_predicated_sums=predicated_sums,
                                       histogram_race=race, decision_fold=fold, dependent_launch=dependent),
                       unavailable=_dependent_launch_unavailable if dependent else _triton_unavailable)
    dependent_launch = _DEPENDENT_LAUNCH_NAME.fullmatch(name)
    if dependent_launch is not None:
        dependent = int(dependent_launch.group(1) == "pdl")
        return _triton(name, "Triton, the launcher's own paths" + _DEPENDENT_LAUNCH_WORDS[dependent],
                       _triton_variant(None, dependent_launch=dependent),
                       unavailable=_dependent_launch_unavailable if dependent else _triton_unavailable)
    tree = _TREE_NAME.fullmatch(name)
    if tree is not None and any(tree.groups()):
        return _tree_variant(name, int(tree.group(1)) if tree.group(1) else None,
                             {None: None, "-cand": 1, "-nocand": 0}[tree.group(2)])
    match = _SHAPE_NAME.fullmatch(name)
    if match is None:
        return None
    strategy, block, warps = match.group(1), int(match.group(2)), int(match.group(3))
    chunk = int(match.group(4)) if match.group(4) else None
    if block < 128 or block > 16384 or block & (block - 1):
        raise SpecbenchError(f"{name}: tokens per block must be a power of two from 128 to 16384, got {block}")
    if warps not in (1, 2, 4, 8, 16, 32) or warps * 32 > block:
        raise SpecbenchError(f"{name}: warps per program must be 1, 2, 4, 8, 16 or 32 and at most block / 32, "
                             f"got {warps}")
    if chunk is not None and (strategy != "split" or chunk < block or chunk % block):
        raise SpecbenchError(f"{name}: -chunkN is for split variants and must be a multiple of the block, got {chunk}")
    shape = f"{block} tokens x {warps} warps" + (f", at most {chunk} tokens of a row per program" if chunk else "")
    what = "one program per request forced" if strategy == "sequential" else "the vocabulary split forced"
    return _triton(name, f"Triton, {what}, {shape}",
                   _triton_variant(strategy, block=block, num_warps=warps, split_chunk=chunk), trees=True)


def _tree_variant(name: str, slices: int | None, candidates: int | None) -> Implementation:
    # triton-tree-finishN[-cand|-nocand]: the tree split path forced, its finish kernel at most N slices of a row per
    # request, the race after two rejected siblings from the masses' candidates at any batch or at none
    if slices is not None and slices > 256:
        raise SpecbenchError(f"{name}: -finishN takes 1 to 256 slices of a row, got {slices}")
    return _triton(name, "Triton, the split paths forced"
                   + (f", its finish kernel at most {slices} slices of a row a request" if slices else "")
                   + {None: "", 1: ", the race after two rejected siblings from candidates at any batch",
                      0: ", the race after two rejected siblings by its own pass at any batch"}[candidates],
                   _triton_variant("split", tree_finish_slices=slices, tree_race_candidates=candidates), trees=True)


def _ours(name: str, description: str, prepare, **facts) -> Implementation:
    return Implementation(name, description, prepare=prepare, rng="specbench", seeded=True, batch_invariant=True,
                          truncation=True, logprobs=True, **facts)


# the torch reference follows every method; the Triton kernels token and block, and trees, on every variant
# (triton-split forces the block and tree kernels' split paths too); a shape variant (triton-sequential-BxW,
# triton-split-BxW) times the token method and trees at its shape (the tree kernels take the chain's shapes)
_EVERY_METHOD = tuple(METHODS)
_TRITON_METHODS = ("token", "block")


def _triton(name: str, description: str, prepare, methods: tuple[str, ...] = ("token",),
            trees: bool = False, unavailable=_triton_unavailable) -> Implementation:
    # the block kernels take no truncation yet (the launcher refuses a truncated block call)
    return _ours(name, description, prepare, cuda_graph=True, needs_gpu=True, unavailable=unavailable,
                 methods=methods, trees=trees, truncation_methods=("token",))


BUILT_IN: dict[str, Implementation] = {
    "torch": _ours("torch", "specbench.reference: vectorized torch, the baseline", _backend("torch"),
                   cuda_graph=True, methods=_EVERY_METHOD, trees=True),
    "triton": _triton("triton", "specbench.kernels: Triton kernels", _backend("triton"), _TRITON_METHODS, trees=True),
    "triton-sequential": _triton("triton-sequential", "Triton, one program per request forced",
                                 _triton_variant("sequential"), _TRITON_METHODS, trees=True),
    "triton-split": _triton("triton-split", "Triton, the vocabulary-split kernels forced", _triton_variant("split"),
                            _TRITON_METHODS, trees=True),
}
