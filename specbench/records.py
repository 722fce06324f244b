"""A kernels record's key and one-line description, and the fields they read, without torch.

``specbench merge``, ``compare``, the tables of ``kernels`` and ``--devices``' parent read records only:
importing ``bench`` (and with it torch) for these would cost a process seconds (``results/devices-x2``).
``bench`` imports them from here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

from specbench.errors import SpecbenchError
from specbench.sampling_cases import KNOBS, sampling_key, sampling_label

# a cold median this many times faster than bytes_needed over the copy bandwidth is flagged
DRAM_FLOOR_MARGIN = 1.25

# what a field of a written record must hold: (the words for it, the test)
FieldType = tuple[str, Callable[[Any], bool]]
TEXT: FieldType = ("a string", lambda value: isinstance(value, str))
WHOLE: FieldType = ("a whole number", lambda value: isinstance(value, int) and not isinstance(value, bool))
NUMBER: FieldType = ("a finite number", lambda value: isinstance(value, (int, float)) and not isinstance(value, bool)
                     and math.isfinite(value))
POSITIVE: FieldType = ("a positive number", lambda value: NUMBER[1](value) and value > 0)
FLAG: FieldType = ("true or false", lambda value: isinstance(value, bool))
NAMES: FieldType = ("a list of strings",
                    lambda value: isinstance(value, list) and all(isinstance(x, str) for x in value))
# the fields describe_record and record_key read, each with its type and whether a record must hold it (one it
# may leave out may also be null); a hand-edited file is checked against these (field_problem) before it is read
KEY_FIELDS: dict[str, tuple[FieldType, bool]] = {
    "mode": (TEXT, True), "impl": (TEXT, True), "batch_size": (WHOLE, True), "num_spec_tokens": (WHOLE, True),
    "vocab_size": (WHOLE, True), "dtype": (TEXT, True), "draft": (TEXT, True), "acceptance": (TEXT, True),
    "acceptance_length": (NUMBER, True), "cuda_graph": (FLAG, True), "target": (TEXT, False),
    "converted": (NAMES, False), "conversion": (TEXT, False), "sampling": (TEXT, False), "logprobs": (TEXT, False),
    **{knob: (NUMBER, False) for knob in KNOBS}, "method": (TEXT, False), "inputs": (TEXT, False),
    "draft_noise": (NUMBER, False), "tree": (TEXT, False),
}


def field_problem(record: dict, fields: dict[str, tuple[FieldType, bool]] = KEY_FIELDS) -> str | None:
    """What keeps a written record from being read through ``fields`` (default ``KEY_FIELDS``), as the rest
    of a sentence about the record (``lacks the field batch_size``, ``has batch_size "4" where a whole
    number belongs``), or None when every field is there and of its type."""
    required = {name for name, (_, needed) in fields.items() if needed}
    if "draft_noise" in fields and record.get("inputs") == "natural":  # describe_record shows its noise, not L
        required.add("draft_noise")
    for name, ((words, fits), _) in fields.items():
        if name not in record or record[name] is None:
            if name in required:
                return f"lacks the field {name}" if name not in record else f"has {name} null where {words} belongs"
            continue
        if not fits(record[name]):
            return f"has {name} {json.dumps(record[name], default=repr)} where {words} belongs"
    return None


def refuse_unreadable(where: object, records: list[dict], fields: dict[str, tuple[FieldType, bool]],
                      consequence: str, only: Callable[[dict], bool] = lambda record: True) -> None:
    """A ``SpecbenchError`` for the first of ``records`` (those ``only`` keeps) that ``field_problem`` cannot
    read through ``fields``: ``{where}: record {index} {problem}, {consequence}``, the index counting every
    record, the reader's ``consequence`` saying what it cannot do (``so merge cannot tell which case it is``)."""
    for index, record in enumerate(records):
        problem = field_problem(record, fields) if only(record) else None
        if problem:
            raise SpecbenchError(f"{where}: record {index} {problem}, {consequence}")


def describe_record(record: dict) -> str:
    """The case of a record in one line (as ``Case.describe``)."""
    draft = f"/{record['draft']}" if record["mode"] == "probabilistic" else ""
    graph = " graph" if record["cuda_graph"] else ""
    graph += " target-probs" if record.get("target", "logits") == "probs" else ""
    if record.get("converted"):
        graph += f" ({', '.join(record['converted'])}, {record['conversion']} the timed call)"
    if record.get("inputs", "planned") == "natural":
        length = f"natural noise={record['draft_noise']:g}"
    else:
        length = f"L={record['acceptance_length']:g}"
    method = f" method={record['method']}" if record.get("method", "token") != "token" else ""
    size = f"K={record['num_spec_tokens']}"
    if record.get("tree") is not None:
        size = f"tree {record['tree']} N={record['num_spec_tokens']}"
    return (f"{record['mode']}{draft} B={record['batch_size']} {size} "
            f"V={record['vocab_size']} {record['dtype']} {length}{sampling_label(record)}{method}{graph}")


def record_key(record: dict) -> tuple:
    """``Case.key`` of a written record (the acceptance label tells apart profiles of one mean length)."""
    return (record["mode"], record["impl"], record["batch_size"], record["num_spec_tokens"], record["vocab_size"],
            record["dtype"], record["draft"], record["acceptance"], round(float(record["acceptance_length"]), 6),
            bool(record["cuda_graph"]), record.get("target", "logits"), record.get("conversion"), *sampling_key(record),
            record.get("method", "token"), record.get("inputs", "planned"), record.get("draft_noise"),
            record.get("tree"))
