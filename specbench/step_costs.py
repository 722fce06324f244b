"""What one speculative step costs, in milliseconds: measured (a cost file) or modelled (a roofline).

A step at batch ``B`` with ``K`` drafts costs the target's verification forward over ``B * (K + 1)``
tokens, ``K`` draft forwards at batch ``B``, the verification/sampling step and a fixed overhead.
Every :class:`StepCost` says, part by part, whether its number is ``measured``, ``modelled`` or
``none`` (not known, counted as 0). This module imports no torch.

Cost files (measured)
---------------------
CSV, ``#`` lines are comments (put the source there), one header line, then rows::

    part,batch,tokens,ms
    target,1,1,8.47
    target,1,8,28.13
    draft,1,1,0.9
    sampler,1,4,0.06
    overhead,1,,0.5

or the short form ``batch,tokens,ms``, whose rows are all ``target``. TOML holds the same rows as
``[[rows]]`` tables (``part`` defaults to ``target``), with optional top-level ``source``,
``device`` and ``model`` strings::

    source = "where the numbers come from"
    [[rows]]
    part = "target"
    batch = 1
    tokens = 1
    ms = 8.47

What ``tokens`` means per part: ``target`` and ``sampler``, every token of the forward or every row
verified, so ``B * (K + 1)`` at a step; ``draft``, one draft forward, so ``B`` (a step pays ``K`` of
them); ``overhead``, ``B * (K + 1)`` too, or left empty for a per-step constant at that batch.

Between two measured token counts at the same batch the time is interpolated linearly in tokens;
there is no interpolation between batches and no extrapolation past the smallest or largest
measured token count: a step outside what was measured is a :class:`SpecbenchError`, one sentence.
A file is refused when a time is negative or not a number, when a time falls as tokens grow at one
batch (non-monotone), when a row repeats, or when it has no target rows.

A part the file has no rows for costs 0 and is marked ``none`` (an n-gram drafter has no draft
model, for example). A step with ``K = 0`` runs no draft (0, ``none``); its sampler is the file's
sampler at ``tokens = B`` when measured there, else 0 and ``none``.

Roofline (modelled)
-------------------
One forward of ``T`` tokens for ``B`` sequences with ``C`` tokens of context each takes
``max(bytes / bandwidth, flops / peak)``:

* bytes: the weights read once per forward plus the KV cache read, ``B * C * kv_bytes_per_token``.
  Activations, the KV written for the new tokens and any recurrent (Mamba) state are ignored. The
  input embedding table of an untied model is only gathered (``T`` rows), so its parameters are not
  counted as read. For a mixture of experts the weights read are the dense part plus every expert
  the ``T`` tokens touch: with ``E`` experts, ``k`` per token and routing taken as uniform and
  independent, ``E * (1 - (1 - k/E) ** T)`` distinct experts per layer. The dense and per-expert
  sizes follow from the total and active counts: ``expert = (total - active) / (E - k)``,
  ``dense = active - k * expert``. Real routing is skewed, which touches fewer experts.
* flops: ``2 * active_params * T`` for the matrix products, plus attention,
  ``4 * layers * query_heads * head_dim * C * T`` (scores and the weighted sum over ``C`` keys).
  A GPU whose peak FLOP/s is not published here leaves the compute bound out (said in ``describe``).

Draft steps: ``K`` forwards of the draft model at ``T = B``, each with its own KV cache (the same
context length). Sampler: from a ``specbench kernels`` results file (``sampler_results``), the
records at batch ``B`` and ``K`` drafts (``K + 1`` rows per request) of the vocabulary nearest the
target's, the fastest such record; ``K`` between two measured ones is interpolated linearly in
``K + 1`` and outside them refused. Without a results file, and at ``K = 0`` (no verification step;
the kernels file times none), the sampler costs 0 (``none``). The GPU and model specs the roofline reads
(``GPUS``, ``MODELS``, with their sources) live in ``specbench/roofline_specs.py``.
"""

from __future__ import annotations

import csv
import itertools
import json
import math
import operator
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from specbench import results
from specbench.errors import SpecbenchError
from specbench.roofline_specs import GPUS, MODELS, GpuSpec, ModelSpec, resolve_gpu

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

PARTS = ("target", "draft", "sampler", "overhead")
SOURCES = ("measured", "modelled", "none")


@dataclass(frozen=True)
class StepCost:
    """One step at batch B with K drafts, milliseconds."""

    target_ms: float  # the target's forward over B * (K + 1) tokens (K = 0: B tokens, no speculation)
    draft_ms: float  # K draft steps at batch B (0 for K = 0)
    sampler_ms: float  # the verification/sampling step
    overhead_ms: float  # fixed per-step overhead
    sources: dict[str, str] = field(default_factory=dict)  # part -> "measured" | "modelled" | "none"

    @property
    def total_ms(self) -> float:
        return self.target_ms + self.draft_ms + self.sampler_ms + self.overhead_ms


class CostModel(Protocol):
    name: str

    def step(self, batch_size: int, num_spec_tokens: int) -> StepCost: ...

    def describe(self) -> list[str]: ...


def _check_step(batch_size: int, num_spec_tokens: int) -> tuple[int, int]:
    """``(B, K)`` as Python ints (numpy integers accepted); anything else is a usage error."""
    try:
        b = operator.index(batch_size) if not isinstance(batch_size, bool) else -1
        k = operator.index(num_spec_tokens) if not isinstance(num_spec_tokens, bool) else -1
    except TypeError:
        b = k = -1
    if b < 1:
        raise SpecbenchError(f"batch size {batch_size!r} must be a positive integer")
    if k < 0:
        raise SpecbenchError(f"number of drafts {num_spec_tokens!r} must be a non-negative integer")
    return b, k


def _interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """Linear interpolation through ``points`` (sorted by x); None outside their range."""
    if not points or x < points[0][0] or x > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[0][1]  # a single point, x equal to it


# ----------------------------------------------------------------------------------------------
# measured: cost files


class MeasuredCosts:
    """Step costs read from a cost file (see the module docstring for the format and rules)."""

    def __init__(self, path: Path, table: dict[tuple[str, int], list[tuple[float, float]]],
                 constant_overhead: dict[int, float], about: dict[str, str]):
        self.path = path
        self.name = f"measured ({path.name})"
        self._table = table
        self._constant_overhead = constant_overhead
        self._about = about

    def _parts(self) -> set[str]:
        return {part for part, _ in self._table} | ({"overhead"} if self._constant_overhead else set())

    def batches(self, part: str = "target") -> list[int]:
        found = {batch for p, batch in self._table if p == part}
        if part == "overhead":
            found |= set(self._constant_overhead)
        return sorted(found)

    def _lookup(self, part: str, batch: int, tokens: int, *, required: bool = True) -> float | None:
        points = self._table.get((part, batch))
        if points is None:
            if not required:
                return None
            have = ", ".join(str(b) for b in self.batches(part))
            raise SpecbenchError(f"cost file {self.path} has no {part} rows at batch {batch} (measured batches: "
                                 f"{have}); costs are not interpolated or extrapolated between batches")
        value = _interpolate(points, tokens)
        if value is None:
            if not required:
                return None
            raise SpecbenchError(f"cost file {self.path} measures {part} at batch {batch} from {points[0][0]:g} to "
                                 f"{points[-1][0]:g} tokens, not {tokens}; costs are not extrapolated")
        return value

    def step(self, batch_size: int, num_spec_tokens: int) -> StepCost:
        b, k = _check_step(batch_size, num_spec_tokens)
        tokens = b * (k + 1)
        parts = self._parts()
        sources = {}
        target = self._lookup("target", b, tokens)
        sources["target"] = "measured"
        draft = 0.0
        if k > 0 and "draft" in parts:
            draft = k * self._lookup("draft", b, b)
            sources["draft"] = "measured"
        else:
            sources["draft"] = "none"
        sampler = 0.0
        sources["sampler"] = "none"
        if "sampler" in parts:
            value = self._lookup("sampler", b, tokens, required=k > 0)
            if value is not None:
                sampler, sources["sampler"] = value, "measured"
        overhead = 0.0
        sources["overhead"] = "none"
        if "overhead" in parts:
            if b in self._constant_overhead:
                overhead = self._constant_overhead[b]
            else:
                overhead = self._lookup("overhead", b, tokens)
            sources["overhead"] = "measured"
        return StepCost(target, draft, sampler, overhead, sources)

    def max_spec_tokens(self, batch_size: int) -> int | None:
        """The largest K this file costs at batch B (every K from 0 up to it is covered), or None if K = 0 is not."""
        points = self._table.get(("target", batch_size))
        if not points:
            return None
        best = None
        for k in range(int(points[-1][0]) // batch_size):
            try:
                self.step(batch_size, k)
            except SpecbenchError:
                break
            best = k
        return best

    def describe(self) -> list[str]:
        lines = [f"costs measured, from {self.path}"]
        for key in ("source", "device", "model"):
            if self._about.get(key):
                lines.append(f"  {key}: {self._about[key]}")
        for part in PARTS:
            batches = self.batches(part)
            if not batches:
                lines.append(f"  {part}: none (no rows; counted as 0)")
                continue
            spans = []
            for batch in batches:
                points = self._table.get((part, batch))
                if points:
                    spans.append(f"B={batch}: {points[0][0]:g}-{points[-1][0]:g} tokens")
                else:
                    spans.append(f"B={batch}: per step")
            lines.append(f"  {part}: measured ({'; '.join(spans)}), linear in tokens between measured points")
        return lines


def _number(value: Any, what: str, where: str, *, integer: bool) -> float:
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        raise SpecbenchError(f"{where}: {what} {value!r} is not a number") from None
    if integer:
        if not math.isfinite(number) or number != int(number) or number < 1:
            raise SpecbenchError(f"{where}: {what} {value!r} must be a positive integer")
        return int(number)
    if not math.isfinite(number):
        raise SpecbenchError(f"{where}: {what} {value!r} is not a finite number")
    if number < 0:
        raise SpecbenchError(f"{where}: {what} {value!r} is negative")
    return number


def _read_csv(path: Path, text: str) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1)
             if line.strip() and not line.lstrip().startswith("#")]
    if not lines:
        raise SpecbenchError(f"cost file {path} holds no header and no rows")
    header = [cell.strip().lower() for cell in next(csv.reader([lines[0][1]]))]
    if header not in (["part", "batch", "tokens", "ms"], ["batch", "tokens", "ms"]):
        raise SpecbenchError(f"cost file {path}: the header must be 'part,batch,tokens,ms' or 'batch,tokens,ms', "
                             f"not {','.join(header)!r}")
    rows = []
    for number, line in lines[1:]:
        cells = [cell.strip() for cell in next(csv.reader([line]))]
        if len(cells) != len(header):
            raise SpecbenchError(f"{path} line {number}: {len(cells)} cells where the header has {len(header)}")
        rows.append((f"{path} line {number}", dict(zip(header, cells))))
    return rows, {}


def _read_toml(path: Path, text: str) -> tuple[list[tuple[str, dict[str, Any]]], dict[str, str]]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecbenchError(f"cost file {path} is not valid TOML ({exc})") from exc
    entries = data.get("rows")
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise SpecbenchError(f"cost file {path} needs its rows as [[rows]] tables with batch, tokens and ms")
    about = {key: str(data[key]) for key in ("source", "device", "model") if key in data}
    return [(f"{path} row {index}", entry) for index, entry in enumerate(entries, start=1)], about


def load_cost_file(path: Path) -> CostModel:
    """Measured step costs from a CSV or TOML cost file; a bad file is a one-sentence SpecbenchError."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecbenchError(f"cannot read cost file {path} ({getattr(exc, 'strerror', None) or exc})") from exc
    rows, about = (_read_toml if path.suffix.lower() == ".toml" else _read_csv)(path, text)
    table: dict[tuple[str, int], dict[int, tuple[float, str]]] = {}
    constant: dict[int, float] = {}
    for where, row in rows:
        part = str(row.get("part") or "target").strip().lower()
        if part not in PARTS:
            raise SpecbenchError(f"{where}: part {part!r} is not one of {', '.join(PARTS)}")
        for key in ("batch", "ms"):
            if row.get(key) in (None, ""):
                raise SpecbenchError(f"{where}: {key} is missing")
        batch = _number(row["batch"], "batch", where, integer=True)
        ms = _number(row["ms"], "time", where, integer=False)
        if row.get("tokens") in (None, ""):
            if part != "overhead":
                raise SpecbenchError(f"{where}: tokens is missing (only an overhead row may leave it empty)")
            if batch in constant:
                raise SpecbenchError(f"{where}: a second per-step overhead at batch {batch}")
            constant[batch] = ms
            continue
        tokens = _number(row["tokens"], "tokens", where, integer=True)
        points = table.setdefault((part, batch), {})
        if tokens in points:
            raise SpecbenchError(f"{where}: {part} at batch {batch} and {tokens} tokens repeats {points[tokens][1]}")
        points[tokens] = (ms, where)
    if not any(part == "target" for part, _ in table):
        raise SpecbenchError(f"cost file {path} has no target rows; the target's forward is the one part it must give")
    for batch in constant:
        if ("overhead", batch) in table:
            raise SpecbenchError(f"cost file {path} gives the overhead at batch {batch} both per step and per token "
                                 f"count; keep one")
    sorted_table: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for (part, batch), points in table.items():
        ordered = sorted(points.items())
        for (tokens0, (ms0, _)), (tokens1, (ms1, where1)) in itertools.pairwise(ordered):
            if ms1 < ms0:
                raise SpecbenchError(f"{where1}: {part} at batch {batch} takes {ms1:g} ms at {tokens1} tokens, less "
                                     f"than {ms0:g} ms at {tokens0}; times must not fall as tokens grow")
        sorted_table[(part, batch)] = [(float(tokens), ms) for tokens, (ms, _) in ordered]
    return MeasuredCosts(path, sorted_table, constant, about)


# ----------------------------------------------------------------------------------------------
# modelled: the roofline


class RooflineCosts:
    """Modelled step costs of a target (and draft) on one accelerator."""

    def __init__(self, target: ModelSpec, gpu: GpuSpec, draft: ModelSpec | None, context_length: int,
                 sampler_results: Path | None, overhead_ms: float):
        self.target, self.gpu, self.draft = target, gpu, draft
        self.context_length = context_length
        self.overhead_ms = overhead_ms
        self.sampler_results = sampler_results
        self._sampler = _SamplerTimes(sampler_results, target.vocab_size) if sampler_results is not None else None
        self.name = f"roofline ({target.name}{' + ' + draft.name if draft else ''} on {gpu.name})"

    def forward_ms(self, model: ModelSpec, tokens: int, batch_size: int) -> float:
        """One forward of ``tokens`` tokens for ``batch_size`` sequences of ``context_length`` context, ms."""
        read = model.params_read(tokens) * model.bytes_per_weight
        read += batch_size * self.context_length * model.kv_bytes_per_token
        seconds = read / self.gpu.bandwidth
        if self.gpu.flops is not None:
            flops = 2 * (model.active - model.embedding_params) * tokens
            if model.attention_layers is not None:
                flops += 4 * model.attention_layers * model.query_heads * model.head_dim * self.context_length * tokens
            seconds = max(seconds, flops / self.gpu.flops)
        return seconds * 1e3

    def step(self, batch_size: int, num_spec_tokens: int) -> StepCost:
        b, k = _check_step(batch_size, num_spec_tokens)
        sources = {"target": "modelled"}
        target = self.forward_ms(self.target, b * (k + 1), b)
        draft = 0.0
        if k > 0 and self.draft is not None:
            draft = k * self.forward_ms(self.draft, b, b)
            sources["draft"] = "modelled"
        else:
            sources["draft"] = "none"
        sampler = 0.0
        sources["sampler"] = "none"
        if self._sampler is not None and k > 0:
            sampler = self._sampler.ms(b, k)
            sources["sampler"] = "measured"
        sources["overhead"] = "modelled" if self.overhead_ms > 0 else "none"
        return StepCost(target, draft, sampler, self.overhead_ms, sources)

    def sampler_record(self, batch_size: int, num_spec_tokens: int) -> list[dict]:
        """The results records a step's sampler time comes from (one, or the two it is interpolated between)."""
        if self._sampler is None or num_spec_tokens == 0:
            return []
        return self._sampler.records(batch_size, num_spec_tokens)

    def describe(self) -> list[str]:
        gpu = self.gpu
        flops = f"{gpu.flops / 1e12:g} TFLOP/s dense" if gpu.flops else "no published FLOP/s (memory bound only)"
        lines = [f"costs modelled by a roofline on {gpu.name}: {gpu.bandwidth / 1e12:g} TB/s, {flops} ({gpu.source})",
                 f"  context length {self.context_length} tokens per sequence"]
        for role, model in (("target", self.target), ("draft", self.draft)):
            if model is None:
                lines.append(f"  {role}: none (no draft model given; counted as 0)")
                continue
            moe = (f", MoE {model.num_experts} experts / {model.experts_per_token} per token, active "
                   f"{model.active / 1e9:g}B" if model.is_moe else "")
            kv = (f"{model.kv_bytes_per_token / 1024:g} KiB KV per token" if model.attention_layers is not None
                  else "KV cache not modelled (attention layers unknown)")
            lines.append(f"  {role}: modelled, {model.name}: {model.params / 1e9:g}B params at "
                         f"{model.bytes_per_weight:g} bytes{moe}, {kv} ({model.source})")
        if self._sampler is None:
            lines.append("  sampler: none (no specbench kernels results given; counted as 0)")
        else:
            lines.append(f"  sampler: measured, from {self._sampler.path} ({self._sampler.describe()})")
        lines.append(f"  overhead: {'modelled, ' + format(self.overhead_ms, 'g') + ' ms a step as given'}"
                     if self.overhead_ms > 0 else "  overhead: none (0 ms)")
        return lines


class _SamplerTimes:
    """Sampler times of a ``specbench kernels`` results file, looked up by batch and K."""

    def __init__(self, path: Path, vocab_size: int | None):
        self.path = Path(path)
        given = self.path
        file = results.results_file(given)
        try:
            payload = json.loads(results.read_text(file))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise SpecbenchError(f"{given} is not a readable specbench results file ({exc})") from exc
        records = payload.get("records") if isinstance(payload, dict) else None
        metadata = payload.get("metadata") if isinstance(payload, dict) else None
        self.device = str(metadata.get("device", "unknown device")) if isinstance(metadata, dict) else "unknown device"
        if not isinstance(records, list):
            raise SpecbenchError(f"{given} is not a specbench results file (it needs a 'records' list)")
        usable = [r for r in records if isinstance(r, dict) and r.get("kind") == "kernels"
                  and r.get("status", "ok") == "ok" and isinstance(r.get("median_us"), (int, float))]
        if not usable:
            raise SpecbenchError(f"{given} holds no finished specbench kernels records to read sampler times from")
        vocabs = sorted({int(r["vocab_size"]) for r in usable})
        if vocab_size is None:
            self.vocab = vocabs[-1]
        else:
            self.vocab = min(vocabs, key=lambda v: (abs(v - vocab_size), -v))
        self.target_vocab = vocab_size
        self._records = [r for r in usable if int(r["vocab_size"]) == self.vocab]

    def describe(self) -> str:
        wanted = f"nearest to the target's {self.target_vocab}" if self.target_vocab else "the largest"
        return (f"kernels records on {self.device} at V={self.vocab} ({wanted}); per (B, K) the fastest record's median, "
                f"linear in K+1 between measured K")

    def _best(self, batch: int, k: int) -> dict | None:
        found = [r for r in self._records if r.get("batch_size") == batch and r.get("num_spec_tokens") == k]
        return min(found, key=lambda r: r["median_us"]) if found else None

    def records(self, batch: int, k: int) -> list[dict]:
        exact = self._best(batch, k)
        if exact is not None:
            return [exact]
        measured = sorted({r["num_spec_tokens"] for r in self._records if r.get("batch_size") == batch})
        if not measured:
            have = sorted({r["batch_size"] for r in self._records})
            raise SpecbenchError(f"{self.path} has no kernels records at batch {batch} (V={self.vocab}; measured "
                                 f"batches: {', '.join(map(str, have))}); sampler times are not interpolated between "
                                 f"batches")
        below = [m for m in measured if m < k]
        above = [m for m in measured if m > k]
        if not below or not above:
            raise SpecbenchError(f"{self.path} measures the sampler at batch {batch} for K = "
                                 f"{', '.join(map(str, measured))}, not {k}; sampler times are not extrapolated")
        return [self._best(batch, below[-1]), self._best(batch, above[0])]

    def ms(self, batch: int, k: int) -> float:
        found = self.records(batch, k)
        points = [(r["num_spec_tokens"] + 1, r["median_us"] / 1e3) for r in found]
        return points[0][1] if len(points) == 1 else _interpolate(points, k + 1)


def roofline(target: ModelSpec, gpu: str | GpuSpec, *, draft: ModelSpec | None = None, context_length: int,
             sampler_results: Path | None = None, overhead_ms: float = 0.0) -> CostModel:
    """Modelled step costs (see the module docstring for the rules); the sampler measured if a results file is given."""
    if not isinstance(context_length, int) or context_length < 0:
        raise SpecbenchError(f"context length {context_length!r} must be a non-negative integer")
    if not math.isfinite(overhead_ms) or overhead_ms < 0:
        raise SpecbenchError(f"overhead {overhead_ms!r} ms must be a non-negative number")
    return RooflineCosts(target, resolve_gpu(gpu), draft, context_length, sampler_results, overhead_ms)


# ----------------------------------------------------------------------------------------------
# the roofline beside published measurements


@dataclass(frozen=True)
class PublishedStep:
    """One published forward/step time, with what it was measured on."""

    source: str
    gpu: str  # a GPUS key
    model: str  # a MODELS key
    batch_size: int
    tokens: int  # tokens in the forward
    measured_ms: float
    what: str  # what the time covers


_VLLM_MLX_699 = "waybarrios/vllm-mlx #699 (verify forward of width w, M5 Max, MLX 6-bit)"
PUBLISHED: tuple[PublishedStep, ...] = (
    *(PublishedStep(_VLLM_MLX_699, "M5-Max", "Nemotron-3.5-Lightning-30B-A3B-6bit", 1, width, ms,
                    "one verify forward")
      for width, ms in ((1, 8.47), (2, 13.49), (3, 15.64), (5, 20.67), (8, 28.13))),
    PublishedStep("vllm-project/vllm #16937 (vanilla Llama-3.1-8B-Instruct, H100, batch 1: 133 output tok/s)", "H100",
                  "Llama-3.1-8B", 1, 1, 1000 / 133, "a whole decode step, 1000/133 ms: forward, sampling, scheduling"),
    PublishedStep("cloudai.pt, CUDA Graphs + torch.compile (Llama 3.1 8B decode step, H100 SXM5, eager)", "H100",
                  "Llama-3.1-8B", 1, 1, 8.4, "one decode step, eager"),
    PublishedStep("cloudai.pt, CUDA Graphs + torch.compile (Llama 3.1 8B decode step, H100 SXM5, CUDA graph)", "H100",
                  "Llama-3.1-8B", 1, 1, 5.1, "one decode step, CUDA graph"),
)


def compare_published(points: tuple[PublishedStep, ...] = PUBLISHED) -> list[dict[str, Any]]:
    """The roofline's forward time beside each published time; error = (modelled - measured) / measured.

    No published point here states its context length, so the roofline runs at context 0 (no KV read).
    """
    rows = []
    for point in points:
        model = roofline(MODELS[point.model], point.gpu, context_length=0)
        modelled = model.forward_ms(MODELS[point.model], point.tokens, point.batch_size)
        rows.append({"source": point.source, "gpu": GPUS[point.gpu].name, "model": point.model,
                     "batch_size": point.batch_size, "tokens": point.tokens, "what": point.what,
                     "measured_ms": point.measured_ms, "modelled_ms": modelled,
                     "error": (modelled - point.measured_ms) / point.measured_ms})
    return rows


def published_table() -> str:
    """``compare_published`` as a Markdown table (the one in the README)."""
    lines = ["| source | model on device | B | tokens | measured ms | roofline ms | error |",
             "|---|---|---:|---:|---:|---:|---:|"]
    for row in compare_published():
        lines.append(f"| {row['source']} | {row['model']} on {row['gpu']} | {row['batch_size']} | {row['tokens']} | "
                     f"{row['measured_ms']:.2f} | {row['modelled_ms']:.2f} | {row['error']:+.0%} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(published_table())
