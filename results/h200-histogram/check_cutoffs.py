"""The split histogram path's cutoffs beside the split radix path's and the torch reference's, on rows of a
real vocabulary (GPU): per case, the tokens whose kept state differs between the paths, the largest relative
difference of the kept mass, and how many rows each stage of the histogram path finished (``list``: among
its candidates; ``coarse``: at the coarse step, every token in play kept; ``fallback``: the one-program
search). Usage: python3 results/h200-histogram/check_cutoffs.py (from the repository root)."""

import math

import torch

from specbench import truncation
from specbench.kernels import histogram, launch

torch.manual_seed(0)
DEVICE = torch.device("cuda")
kept_scratch = []
_summarize = launch._summarize


def _keep(*args, **kwargs):
    scratch = _summarize(*args, **kwargs)
    kept_scratch.append(scratch)
    return scratch


launch._summarize = _keep


def summaries(values, is_probs, knobs, search):
    launch.TUNING["split_search"] = search
    batch, rows, _vocab = values.shape
    kept_scratch.clear()
    out = launch.truncation_summaries(target=values, target_is_probs=is_probs,
                                      temperatures=torch.ones(batch, device=DEVICE),
                                      num_draft_tokens=torch.full((batch,), rows - 1, dtype=torch.int32, device=DEVICE),
                                      top_k=None, **({"top_p": None, "min_p": None} | knobs))
    # (cloned now: the other path's call reuses the same scratch)
    stages = kept_scratch[0].radix_state_i[:batch * rows * 2 * 8].view(batch, rows, 2, 8)[:, :, 0, 0].clone()
    return out, stages


def kept(values, is_probs, tau, iota):
    ranked = torch.where(values > 0, values, -math.inf) if is_probs else values
    ids = torch.arange(values.shape[-1], device=DEVICE)
    return ((ranked > tau[..., None]) | ((ranked == tau[..., None]) & (ids <= iota[..., None]))) & (ranked > -math.inf)


def case(name, logits, knobs, is_probs=False):
    values = torch.softmax(logits.float(), -1).to(logits.dtype) if is_probs else logits
    (m1, s1, t1, i1, _n1), stages = summaries(values, is_probs, knobs, 1)
    (m2, s2, t2, i2, _n2), _ = summaries(values, is_probs, knobs, 0)
    v = values.float()
    a, b = kept(v, is_probs, t1, i1), kept(v, is_probs, t2, i2)
    batch = values.shape[0]
    rows = v.shape[1]
    top_p = knobs.get("top_p", torch.ones(batch, device=DEVICE))
    min_p = knobs.get("min_p", torch.zeros(batch, device=DEVICE))
    ref = torch.stack([truncation.kept_mask(v[r], None, top_p[r:r + 1].expand(rows), min_p[r:r + 1].expand(rows),
                                            is_probs) for r in range(batch)])
    counts = {label: int((stages == code).sum()) for label, code in
              (("list", histogram.SEARCH.value), ("coarse", histogram.CLOSED.value), ("fallback", histogram.FALLBACK.value))}
    rel = float(((s1 - s2).abs() / s2.abs().clamp(min=1e-30)).max())
    print(f"{name}: differing tokens histogram/radix {int((a != b).sum())}, histogram/reference {int((a != ref).sum())}, "
          f"radix/reference {int((b != ref).sum())}, kept {int(a.sum())}, max rel S diff {rel:.2e}, m equal "
          f"{bool(torch.equal(m1, m2))}, stages {counts}", flush=True)


B, R, V = 16, 4, 151936
flat = torch.randn(B, R, V, device=DEVICE)
peaked = torch.randn(B, R, V, device=DEVICE) * 4
ones = lambda x: torch.full((B,), x, device=DEVICE)
for label, logits in (("flat", flat), ("peaked", peaked), ("flat bf16", flat.bfloat16()), ("peaked bf16", peaked.bfloat16())):
    for is_probs in (False, True):
        form = "probs" if is_probs else "logits"
        case(f"{label} {form} top_p 0.95", logits, {"top_p": ones(0.95)}, is_probs)
        case(f"{label} {form} top_p 0.5 min_p 0.05", logits, {"top_p": ones(0.5), "min_p": ones(0.05)}, is_probs)
        case(f"{label} {form} min_p 0.1", logits, {"min_p": ones(0.1)}, is_probs)
        case(f"{label} {form} top_p 0.999", logits, {"top_p": ones(0.999)}, is_probs)
        case(f"{label} {form} top_p 1e-6", logits, {"top_p": ones(1e-6)}, is_probs)
