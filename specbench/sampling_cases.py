"""The sampling parameters of a benchmark case: truncation (``top_k``, ``top_p``, ``min_p``), the
``mixed`` batch, log-probabilities; their checks, labels and part of a record's key.

No torch here: the CLI's option checks, the charts and ``compare`` read it without loading torch.

A case either gives every request the same knobs (``sampling="fixed"``, the values as given, each
None when off) or cycles its requests through ``MIXED`` (``sampling="mixed"``): request ``b`` takes
``MIXED[b % 6]``, so a batch of 6 or more holds every kind, a greedy row included:

====  ===========  ======  ======  ======
b%6   temperature  top_k   top_p   min_p
====  ===========  ======  ======  ======
0     0 (greedy)   off     off     off
1     1            off     off     off
2     1            50      off     off
3     1            off     0.9     off
4     1            off     off     0.05
5     1            50      0.9     off
====  ===========  ======  ======  ======

Off is 0 for ``top_k``, 1 for ``top_p`` and 0 for ``min_p`` (``specbench/verification.py``). A knob given
at its off value is the untruncated case itself (the contract makes it bit-identical), so it is
stored as None: such a case, its label and its record are the untruncated ones.
"""

from __future__ import annotations

import math
from typing import Any

from specbench.errors import SpecbenchError

SAMPLING_KINDS: tuple[str, ...] = ("fixed", "mixed")
LOGPROBS: tuple[str, ...] = ("processed", "raw")  # as specbench.verification.LOGPROBS
KNOBS: tuple[str, ...] = ("top_k", "top_p", "min_p")
OFF: dict[str, float] = {"top_k": 0, "top_p": 1.0, "min_p": 0.0}

# (temperature, top_k, top_p, min_p) of request b % len(MIXED) in a mixed case (module docstring)
MIXED: tuple[tuple[float, int, float, float], ...] = (
    (0.0, 0, 1.0, 0.0),
    (1.0, 0, 1.0, 0.0),
    (1.0, 50, 1.0, 0.0),
    (1.0, 0, 0.9, 0.0),
    (1.0, 0, 1.0, 0.05),
    (1.0, 50, 0.9, 0.0),
)
MIXED_TEXT = ("requests cycle through greedy (T=0), T=1 untruncated, top_k=50, top_p=0.9, min_p=0.05 and "
              "top_k=50 with top_p=0.9 (request b takes kind b % 6)")


def checked_knobs(top_k: Any = None, top_p: Any = None, min_p: Any = None,
                  sampling: str = "fixed") -> dict[str, Any]:
    """``{"top_k", "top_p", "min_p", "sampling"}`` checked, with a knob at its off value made None.

    ``top_k`` a whole number ``>= 0``, ``top_p`` in ``(0, 1]``, ``min_p`` in ``[0, 1]`` (the contract's
    checked ranges); ``sampling`` ``fixed`` or ``mixed``, and ``mixed`` takes no knob (it sets its own).
    A bad value is a ``SpecbenchError`` of one sentence.
    """
    if sampling not in SAMPLING_KINDS:
        raise SpecbenchError(f"sampling must be fixed or mixed, got {sampling!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0):
        raise SpecbenchError(f"top_k must be a whole number >= 0 (0 is off), got {top_k!r}")
    for name, value, low_open, text in (("top_p", top_p, True, "(0, 1] (1 is off)"),
                                        ("min_p", min_p, False, "[0, 1] (0 is off)")):
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise SpecbenchError(f"{name} must be a number in {text}, got {value!r}")
        if value > 1 or value < 0 or (low_open and value == 0):
            raise SpecbenchError(f"{name} must lie in {text}, got {value:g}")
    knobs = {"top_k": top_k, "top_p": None if top_p is None else float(top_p),
             "min_p": None if min_p is None else float(min_p)}
    knobs = {name: None if value is None or value == OFF[name] else value for name, value in knobs.items()}
    if sampling == "mixed" and any(value is not None for value in knobs.values()):
        given = next(name for name, value in knobs.items() if value is not None)
        raise SpecbenchError(f"the mixed sampling sets every request's own {', '.join(KNOBS)}, so it takes no "
                             f"{given} of its own; drop one of them")
    return {**knobs, "sampling": sampling}


def check_logprobs(logprobs: str | None) -> str | None:
    if logprobs is not None and logprobs not in LOGPROBS:
        raise SpecbenchError(f"logprobs must be processed or raw, got {logprobs!r}")
    return logprobs


def truncated(record: dict) -> bool:
    """Whether a case (its record) cuts any request's distribution: a knob set, or the mixed batch."""
    return record.get("sampling", "fixed") == "mixed" or any(record.get(name) is not None for name in KNOBS)


def sampling_key(record: dict) -> tuple:
    """The sampling part of a record's key: None everywhere for the records written before these fields."""
    return (record.get("sampling") or "fixed", *(record.get(name) for name in KNOBS), record.get("logprobs"))


def sampling_fields(case: Any) -> dict[str, Any]:
    """What a record of ``case`` holds about its sampling: only the parameters that are set, so an
    untruncated case's record has none of these fields (as before they existed)."""
    fields: dict[str, Any] = {name: getattr(case, name) for name in KNOBS if getattr(case, name) is not None}
    if case.sampling != "fixed":
        fields["sampling"] = case.sampling
    if case.logprobs is not None:
        fields["logprobs"] = case.logprobs
    return fields


def sampling_label(record: dict) -> str:
    """`` top_k=50 top_p=0.9``, `` sampling=mixed``, `` logprobs=raw``: the set parameters, each after a
    space, or ``""`` for an untruncated case without log-probabilities."""
    parts = []
    if record.get("sampling", "fixed") not in (None, "fixed"):
        parts.append(f"sampling={record['sampling']}")
    # top_k whole (a table's column may hold it as a float), the others as short as they read
    parts += [f"{name}={int(record[name])}" if name == "top_k" else f"{name}={record[name]:g}" for name in KNOBS
              if record.get(name) is not None]
    if record.get("logprobs") is not None:
        parts.append(f"logprobs={record['logprobs']}")
    return "".join(f" {part}" for part in parts)
