"""What each server reports as "acceptance length", and the readers of the sources beyond vLLM's counters.

specbench's mean acceptance length is ``L = 1 + E[A]``: tokens emitted per verification step of one
request, the bonus (or correction) token included, averaged over steps (every step weighs the same,
"pooled"). Servers and tools differ in two ways, so every source says which it uses:

- what one step counts: tokens emitted (``A + 1``, as specbench) or drafts accepted (``A``, one less);
- how steps are averaged: pooled over every step, or per request first and then over requests with
  equal weights (SpecForge's ``average_acceptance_length``, vLLM issue #42508: the two differ when
  long and short requests accept differently, and can even move in opposite directions).

Sources read here (the vLLM counters and ``SpecDecoding metrics`` lines live in ``profile_fit``):

- ``vllm-per-request``: responses of a vLLM server started with ``--per-request-spec-decode-metrics
  summary`` (PR #48915), one JSON object per line (or a JSON list), each with
  ``metrics.speculative_decoding``: ``acceptance_histogram`` (index ``j``: steps that accepted exactly
  ``j`` drafts), ``num_spec_steps``, ``num_accepted_draft_tokens``, ``num_draft_tokens``,
  ``num_spec_tokens`` and ``mean_acceptance_length`` (``1 + accepted / steps``). A streamed chunk
  wrapped as ``{"data": {...}}`` is read too.
- ``sglang-per-request``: SGLang ``/generate`` responses whose ``meta_info`` holds
  ``spec_accept_histogram`` (PR #18332: index ``j``, steps that accepted ``j`` drafts) and
  ``spec_verify_ct``; ``spec_accept_length`` there is ``completion_tokens / spec_verify_ct``.
- ``sglang-log``: SGLang's ``Decode batch`` log lines, ``... accept len: 2.40, accept rate: 0.60, ...``,
  printed every ``decode_log_interval`` batches; ``accept len`` is (drafts accepted + 1 per request
  step) over request steps since the previous line. Only the mean: no per-position rates.
- ``sglang-prometheus``: a scrape of SGLang's ``/metrics`` with the gauges ``sglang:spec_accept_length``
  and ``sglang:spec_accept_rate``: the latest log interval's values, per scheduler rank (a snapshot).

A histogram is the law of ``A`` itself, so it gives the per-position counts the fit needs:
``#(A >= i)`` steps accepted position ``i``. The SGLang mean alone gives ``L`` and no rates: the
profile built from it assumes the geometric schedule at the ``K`` the user names.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from specbench.errors import SpecbenchError


class Definition(NamedTuple):
    """How a source defines its acceptance length and what specbench does with it."""

    server: str
    per_step: str  # "tokens emitted (A + 1)" or "drafts accepted (A)"
    aggregation: str
    conversion: str

    def text(self) -> str:
        return f"{self.server}: {self.per_step} per step, {self.aggregation}; {self.conversion}"


SPECBENCH_DEFINITION = ("specbench's L = 1 + E[A]: tokens emitted per verification step including the bonus token, "
                        "pooled over steps")
_SAME = "the same as specbench's L, taken as is"
DEFINITIONS = {
    "vllm-prometheus": Definition("vLLM /metrics counters", "tokens emitted (A + 1)",
                                  "pooled over steps (1 + accepted / drafts)", _SAME),
    "vllm-log": Definition("vLLM 'SpecDecoding metrics' log line", "tokens emitted (A + 1)",
                           "pooled over the steps since the previous line", _SAME),
    "vllm-per-request": Definition(
        "vLLM per-request metrics (#48915)", "tokens emitted (A + 1)",
        "pooled within each request (its mean_acceptance_length = 1 + accepted / steps)",
        "specbench adds the requests' histograms (every step weighs the same: the pooled L); the unweighted mean "
        "of the per-request lengths (how SpecForge aggregates, #42508) is reported beside it"),
    "sglang-per-request": Definition(
        "SGLang per-request meta_info", "tokens emitted (A + 1)",
        "pooled within each request (spec_accept_length = completion_tokens / spec_verify_ct)",
        "specbench adds the requests' spec_accept_histogram (the pooled L); the unweighted mean of the per-request "
        "lengths is reported beside it"),
    "sglang-log": Definition(
        "SGLang 'Decode batch' log line (accept len)", "tokens emitted (A + 1)",
        "pooled over the request steps of one log interval",
        "taken as specbench's L; lines are averaged weighted by their #running-req (the steps of a line are not "
        "printed); the rates are not measured, so the profile assumes the geometric schedule"),
    "sglang-prometheus": Definition(
        "SGLang /metrics gauge sglang:spec_accept_length", "tokens emitted (A + 1)",
        "pooled over the latest log interval only (a gauge, not a counter)",
        "taken as specbench's L (ranks averaged); the rates are not measured, so the profile assumes the geometric "
        "schedule"),
}
SGLANG_LOG_MARKER = "Decode batch"
_SGLANG_LINE = {
    "length": re.compile(r"accept len:\s*([0-9.]+)"),
    "rate": re.compile(r"accept rate:\s*([0-9.]+)"),
    "running": re.compile(r"#running-req:\s*(\d+)"),
}
# the server's arguments, as SGLang logs them at start-up (server_args=ServerArgs(...)): drafts per step
_SGLANG_STEPS = re.compile(r"speculative_num_steps=(\d+)")
SGLANG_GAUGES = ("sglang:spec_accept_length", "sglang:spec_accept_rate")


@dataclass
class Histogram:
    """Steps by drafts accepted, added over requests: ``steps[j]`` steps accepted exactly ``j`` of ``K``."""

    steps: list[int]
    num_requests: int
    kind: str
    per_request_lengths: list[float] = field(default_factory=list)

    @property
    def num_spec_tokens(self) -> int:
        return len(self.steps) - 1

    def accepted_per_position(self) -> list[int]:
        """Steps that accepted position ``i`` (``1..K``): ``#(A >= i)``."""
        return [sum(self.steps[i:]) for i in range(1, len(self.steps))]

    @property
    def pooled_length(self) -> float:
        total = sum(self.steps)
        return 1.0 + sum(j * n for j, n in enumerate(self.steps)) / total if total else math.nan

    @property
    def per_request_mean_length(self) -> float | None:
        lengths = self.per_request_lengths
        return sum(lengths) / len(lengths) if lengths else None


@dataclass
class MeanLength:
    """A source that gives the mean length only (SGLang's log lines and gauges)."""

    kind: str
    mean_acceptance_length: float
    weight: float  # the lines' #running-req added, or the ranks averaged
    num_values: int
    sources: list[str]
    accept_rate: float | None = None
    span: str | None = None
    notes: list[str] = field(default_factory=list)
    num_spec_tokens: int | None = None  # K when the source names it (a log's server_args line)

    @property
    def definition(self) -> Definition:
        return DEFINITIONS[self.kind]


# ---- per-request histograms (vLLM #48915, SGLang meta_info) ----------------------------------------


def _objects(path: Path, text: str) -> list[tuple[str, Any]]:
    """The JSON objects of a file: one JSON value (an object or a list of them), or one per line."""
    try:
        whole = json.loads(text)
        values = whole if isinstance(whole, list) else [whole]
        return [(f"{path}: item {index + 1}", value) for index, value in enumerate(values)]
    except json.JSONDecodeError:
        pass
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("data:"):  # a server-sent event as captured from a stream
            line = line.removeprefix("data:").strip()
            if line == "[DONE]":
                continue
        try:
            found.append((f"{path}:{number}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise SpecbenchError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
    return found


def _request_histogram(value: Any) -> tuple[str, dict] | None:
    """``(kind, fields)`` of one response that carries a histogram, else None."""
    if not isinstance(value, dict):
        return None
    if isinstance(value.get("data"), dict):
        value = value["data"]
    spec = (value.get("metrics") or {}).get("speculative_decoding") if isinstance(value.get("metrics"), dict) else None
    if isinstance(spec, dict) and "acceptance_histogram" in spec:
        return "vllm-per-request", spec
    meta = value.get("meta_info")
    if isinstance(meta, dict) and "spec_accept_histogram" in meta:
        return "sglang-per-request", meta
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _checked(where: str, kind: str, fields: dict) -> list[int]:
    key = "acceptance_histogram" if kind == "vllm-per-request" else "spec_accept_histogram"
    histogram = fields[key]
    if not isinstance(histogram, list) or len(histogram) < 2 or not all(map(_whole, histogram)):
        raise SpecbenchError(f"{where}: {key} must be a list of at least 2 step counts (whole numbers >= 0), got "
                             f"{json.dumps(histogram)[:80]}")
    steps, accepted = sum(histogram), sum(j * n for j, n in enumerate(histogram))
    expected = {"num_spec_steps": steps, "num_accepted_draft_tokens": accepted,
                "num_spec_tokens": len(histogram) - 1} if kind == "vllm-per-request" else {"spec_verify_ct": steps}
    for name, value in expected.items():
        if name in fields and fields[name] != value:
            raise SpecbenchError(f"{where}: {name} is {fields[name]!r} but {key} {histogram} gives {value}; the "
                                 f"response is inconsistent")
    return histogram


def counts_from_histograms(paths: list[Path]) -> Histogram:
    """Every response's histogram in ``paths``, added up; responses without one (spec decode off, a stream's
    intermediate chunks) are skipped. Requests of different ``K`` or of two servers cannot be combined."""
    total: list[int] | None = None
    kinds: set[str] = set()
    requests, lengths = 0, []
    for path in paths:
        for where, value in _objects(path, path.read_text(encoding="utf-8", errors="replace")):
            found = _request_histogram(value)
            if found is None:
                continue
            kind, fields = found
            kinds.add(kind)
            histogram = _checked(where, kind, fields)
            if total is None:
                total = [0] * len(histogram)
            elif len(histogram) != len(total):
                raise SpecbenchError(f"{where}: a histogram of K = {len(histogram) - 1} where earlier requests have "
                                     f"K = {len(total) - 1}: requests of two configurations cannot be combined")
            total = [a + b for a, b in zip(total, histogram)]
            requests += 1
            if sum(histogram):
                lengths.append(1.0 + sum(j * n for j, n in enumerate(histogram)) / sum(histogram))
    if total is None:
        raise SpecbenchError(f"{', '.join(map(str, paths))}: no response holds metrics.speculative_decoding."
                             f"acceptance_histogram (vLLM --per-request-spec-decode-metrics) or meta_info."
                             f"spec_accept_histogram (SGLang)")
    if len(kinds) > 1:
        raise SpecbenchError(f"{', '.join(map(str, paths))} mix vLLM and SGLang responses; fit one server at a time")
    return Histogram(total, requests, kinds.pop(), lengths)


def holds_histograms(path: Path) -> bool:
    """Whether ``path`` is JSON whose responses carry a per-request histogram."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if not text.lstrip().startswith(("{", "[", "data:")):
        return False
    try:
        return any(_request_histogram(value) for _, value in _objects(path, text))
    except SpecbenchError:
        return False


# ---- SGLang's mean length: log lines and gauges --------------------------------------------------


def holds_sglang_log(lines: list[str]) -> bool:
    return any(SGLANG_LOG_MARKER in line and "accept len:" in line for line in lines)


def holds_sglang_scrape(lines: list[str]) -> bool:
    return any(line.lstrip().startswith(SGLANG_GAUGES[0]) for line in lines)


def mean_from_sglang_logs(paths: list[Path], lines_of) -> MeanLength:
    """The accept len of every ``Decode batch`` line, averaged weighted by the line's ``#running-req``."""
    weighted = weight = 0.0
    rates: list[float] = []
    count = 0
    steps: set[int] = set()
    for path in paths:
        for number, line in enumerate(lines_of(path), start=1):
            named = _SGLANG_STEPS.search(line) if "server_args" in line else None
            if named:
                steps.add(int(named.group(1)))
            if SGLANG_LOG_MARKER not in line or "accept len:" not in line:
                continue
            where = f"{path}:{number}"
            length = _SGLANG_LINE["length"].search(line)
            running = _SGLANG_LINE["running"].search(line)
            if not length or not running:
                raise SpecbenchError(f"{where}: a 'Decode batch' line without its "
                                     f"{'accept len' if not length else '#running-req'} field: {line.strip()[:100]!r}")
            value, requests = float(length.group(1)), int(running.group(1))
            if value == 0.0 or requests == 0:
                continue  # an idle interval (SGLang prints 0 when nothing was verified)
            if value < 1.0:
                raise SpecbenchError(f"{where}: accept len {value:g} is below 1; SGLang counts the bonus token, so "
                                     f"its accept len is at least 1")
            weighted += value * requests
            weight += requests
            count += 1
            rate = _SGLANG_LINE["rate"].search(line)
            if rate:
                rates.append(float(rate.group(1)))
    if count == 0:
        raise SpecbenchError(f"{', '.join(map(str, paths))}: no 'Decode batch' line with a non-zero accept len")
    if len(steps) > 1:
        raise SpecbenchError(f"{', '.join(map(str, paths))} hold servers started with different "
                             f"speculative_num_steps ({sorted(steps)}); fit one configuration at a time")
    found = MeanLength("sglang-log", weighted / weight, weight, count, [str(p) for p in paths],
                       accept_rate=sum(rates) / len(rates) if rates else None, span=f"{count} log lines",
                       num_spec_tokens=steps.pop() if steps else None)
    found.notes.append("SGLang prints accept len to two decimals and not the steps behind a line: lines are weighted "
                       "by #running-req")
    return found


def mean_from_sglang_scrape(paths: list[Path], lines_of) -> MeanLength:
    """``sglang:spec_accept_length`` of one scrape, averaged over the ranks that report a non-zero value."""
    if len(paths) != 1:
        raise SpecbenchError(f"SGLang's spec_accept_length is a gauge (the latest log interval), not a counter: give "
                             f"one scrape, got {len(paths)}")
    values: dict[str, list[float]] = {name: [] for name in SGLANG_GAUGES}
    for number, line in enumerate(lines_of(paths[0]), start=1):
        line = line.strip()
        name = next((gauge for gauge in SGLANG_GAUGES if line.startswith((gauge + "{", gauge + " "))), None)
        if name is None:
            continue
        try:
            values[name].append(float(line.rsplit(None, 1)[-1]))
        except ValueError:
            raise SpecbenchError(f"{paths[0]}:{number}: the value of {name} is not a number: {line[:80]!r}") from None
    lengths = [value for value in values[SGLANG_GAUGES[0]] if value > 0]
    if not lengths:
        raise SpecbenchError(f"{paths[0]}: every sglang:spec_accept_length is 0: no rank verified drafts in its latest "
                             f"interval, so there is nothing to measure")
    rates = [value for value in values[SGLANG_GAUGES[1]] if value > 0]
    found = MeanLength("sglang-prometheus", sum(lengths) / len(lengths), len(lengths), len(lengths),
                       [str(paths[0])], accept_rate=sum(rates) / len(rates) if rates else None,
                       span=f"the latest log interval of {len(lengths)} rank(s)")
    found.notes.append("a gauge holds the latest log interval only: scrape right after the load you want to describe")
    return found
