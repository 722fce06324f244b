"""A kernels record's key and one-line description, without torch.

``specbench merge``, ``compare``, the tables of ``kernels`` and ``--devices``' parent read records only:
importing ``bench`` (and with it torch) for these would cost a process seconds (``results/devices-x2``).
``bench`` imports them from here.
"""

from __future__ import annotations

from specbench.sampling_cases import sampling_key, sampling_label

# a cold median this many times faster than bytes_needed over the copy bandwidth is flagged
DRAM_FLOOR_MARGIN = 1.25


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
