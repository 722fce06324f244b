"""A complete specbench plugin: the chain sampler in plain torch, probabilities in.

    specbench verify --impl examples/my_sampler.py:my_sampler
    specbench kernels --impl torch,examples/my_sampler.py:my_sampler --mode probabilistic
"""

import torch

from specbench import VerifyResult
from specbench.implementations import sampler


@sampler(modes=["probabilistic"], target="probs", draft="probs", rng="own")
def my_sampler(*, target_probs, draft_probs, draft_token_ids, num_draft_tokens, **_) -> VerifyResult:
    """Leviathan et al. (2022), one request at a time."""
    batch, num_rows, vocab = target_probs.shape
    out = torch.full((batch, num_rows), -1, dtype=torch.int64, device=target_probs.device)
    accepted = torch.zeros(batch, dtype=torch.int32, device=target_probs.device)
    for b in range(batch):
        n = int(num_draft_tokens[b])
        for i in range(n + 1):
            p = target_probs[b, i].float()
            x = int(draft_token_ids[b, i]) if i < n else -1
            if i == n:  # every draft accepted: the bonus token comes from p
                out[b, i] = torch.multinomial(p, 1)
            elif 0 <= x < vocab and torch.rand(()) * draft_probs[b, i, x] < p[x]:
                out[b, i], accepted[b] = x, i + 1
                continue
            else:  # rejected: sample the residual max(p - q, 0), or p when nothing is left
                q = draft_probs[b, i].float() if 0 <= x < vocab else torch.zeros_like(p)
                residual = (p - q).clamp_min(0)
                out[b, i] = torch.multinomial(residual if residual.sum() > 0 else p, 1)
            break
    return VerifyResult(out, accepted + 1, accepted)
