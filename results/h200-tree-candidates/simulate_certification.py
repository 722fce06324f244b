"""How often the race from candidates falls back, simulated in float64 on the CPU (no kernel involved).

The split path's slices each keep, per lane of 512 tokens, the token of largest r1 / E (r1 = max(p - q0, 0), E the
race's exponentials), publish their C best lanes, and bound every other token's ratio; the race after the second
child is over r2 = max(r1 - R q1, 0), R = sum r1. The race from candidates stands where the winner among them beats
the bound by the margin (specbench/kernels/tree.py, CANDIDATE_MARGIN). Rows: softmax of standard normal logits,
V = 128256 (Llama 3), p, q0 and q1 independent ("independent") or q1 = q0 ("same"); slices as the launcher cuts
them on an H200 at B = 1 (251 slices of one chunk) and B = 8 (63 slices of four). Prints the share of 200 races per
setting that fall back; every race that stands is checked to be the full race's winner.

    python results/h200-tree-candidates/simulate_certification.py
"""

import torch

VOCAB, LANES, TRIALS = 128256, 512, 200


def fell_back(slices: int, chunks: int, kept: int, same: bool, gen: torch.Generator) -> bool:
    def law():
        return torch.softmax(torch.randn(VOCAB, dtype=torch.float64, generator=gen), 0)

    p, q0 = law(), law()
    q1 = q0 if same else law()
    r1 = (p - q0).clamp_min(0)
    e = -torch.log(torch.rand(VOCAB, dtype=torch.float64, generator=gen))
    ratio, value = r1 / e, (r1 - r1.sum() * q1).clamp_min(0) / e
    pad = slices * chunks * LANES - VOCAB
    ratio = torch.cat([ratio, ratio.new_zeros(pad)]).view(slices, chunks, LANES)
    value = torch.cat([value, value.new_zeros(pad)]).view(slices, chunks, LANES)
    lane_best, at = ratio.max(1)  # per lane: its best token and what it dropped
    dropped = ratio.sort(1, descending=True).values[:, 1, :] if chunks > 1 else torch.zeros_like(lane_best)
    lane_value = value.gather(1, at[:, None, :]).squeeze(1)
    order, lanes = lane_best.sort(1, descending=True)
    winner = lane_value.gather(1, lanes[:, :kept]).max()
    bound = torch.maximum(dropped.max(1).values, order[:, kept]).max()
    if winner > bound * (1 + 1e-4):
        assert winner == value.max()
        return False
    return True


def main() -> None:
    gen = torch.Generator().manual_seed(0)
    for slices, chunks in ((251, 1), (63, 4)):
        for kept in (1, 2, 4):
            shares = [sum(fell_back(slices, chunks, kept, same, gen) for _ in range(TRIALS)) / TRIALS
                      for same in (False, True)]
            print(f"{slices} slices of {chunks} chunk(s), {kept} candidate(s) a slice: fell back in "
                  f"{shares[0]:.1%} (independent q1), {shares[1]:.1%} (q1 = q0)", flush=True)


if __name__ == "__main__":
    main()
