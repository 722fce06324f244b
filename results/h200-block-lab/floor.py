"""The DRAM floor of the token and block rules on the lab table's cases: which whole rows each must read.

For each case of ``run.sh time`` (B x K x V: 64 x 4 qwen3, 256 x 7 qwen3, 512 x 7 llama3; float32; natural inputs,
noise 1, and planned inputs at L = 3; target and draft both logits or both probabilities) the inputs are built as
``specbench kernels`` builds them (``bench.plan_cases``, ``bench.make_inputs``, seed 0), each rule's accepted
count ``A`` per request comes from the torch reference (``specbench.verify(..., backend="torch")``), and from
``A``, the weights ``w_i`` (``oracle.block_weights``) and the uniforms ``u_i = U(seed, pos + i, ACCEPT)`` each
request's reads are counted under the contract (``specbench/verification.py``, "Verification methods"):

- ``token``: row ``A``'s residual (or row ``n``'s bonus) whole; before it the tests' ``p_i(x_i)``, ``q_i(x_i)``,
  which from logits need each tested row's softmax statistics: target rows ``0..A``, draft rows ``0..min(A, n-1)``.
  This is ``bench.bytes_moved``'s count (checked equal below).
- ``block``: the backward pass as the contract wrote it before the clamp of 42c6108: ``r_i`` for every test ``i`` from ``n - 1`` down to
  ``max(A, 1)``, the terminal row's race, and from logits the statistics of rows ``0..n-1`` (``w_n`` needs them).
- ``block-min``: the least an exact block rule must read on these inputs: a row whose test is decided without
  ``r_i`` is skipped. ``h_i <= w_i`` (``r_i <= w_i * sum p_i <= w_i`` for a row that sums to at most 1), so
  ``u_{i-1} >= w_i`` fails test ``i`` unread (SGLang's kernel skips these); after the first zero weight every
  later weight and ``h`` is 0, so neither those rows' ``r_i`` nor their statistics are needed. (A float32
  softmax sums to 1 within ~1e-6, so the skip can differ from the contract's ``h_i`` in a window of that width.)

Bytes are whole rows (``V`` elements) plus gathered values, plus the per-request small tensors ``bench.bytes_moved``
counts, so each figure is comparable with a row's ``bytes_needed``. ``unique`` counts a row once (every re-read
hits L2); ``passes`` counts a row once per pass it needs (nothing survives in L2 between passes), since from logits
a row's residual needs its statistics first: token's row ``A``, block's ``r_i`` rows and terminal row. The floor is
bytes over ``--gbps`` (default: ``timing.peak_bandwidth_gbps`` measured on the GPU; 4150 GB/s, the H200's as
measured in ``results/h200-split-paths``, on a CPU).

    python results/h200-block-lab/floor.py [--gbps G] [--batch B] [--vocab V] [--show N]
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import NamedTuple

import torch

from specbench import bench, oracle, rng, scenarios, timing
from specbench.verification import verify

H200_COPY_GBPS = 4150.0
SHAPES = ((64, 4, "qwen3"), (256, 7, "qwen3"), (512, 7, "llama3"))  # (B, K, model): the three shapes
VOCABS = {"qwen3": 151936, "llama3": 128256}
RULES = ("token", "block", "block-min")


class Reads(NamedTuple):
    """One request's reads under one rule: whole rows (each counted once), row passes, gathered values."""

    target_rows: int
    draft_rows: int
    target_passes: int
    draft_passes: int
    gathers: int


def token_reads(accepted: int, n: int, target_logits: bool, draft_logits: bool) -> Reads:
    # the residual max(p - q, 0) at row A < n needs p_A and q_A whole; A = n: the bonus race over p_n alone
    rejected = accepted < n
    if target_logits:  # p_i(x_i) needs row i's max and sum: rows 0..A, row A twice when a residual follows
        target_rows, target_passes, target_gathers = accepted + 1, accepted + 1 + rejected, 0
    else:  # p_i(x_i) read as given, row A whole
        target_rows, target_passes, target_gathers = 1, 1, accepted
    if draft_logits:  # q_i(x_i) for the tests 0..min(A, n - 1)
        draft_rows = min(accepted + 1, n)
        draft_passes, draft_gathers = draft_rows + rejected, 0
    else:
        draft_rows, draft_passes, draft_gathers = int(rejected), int(rejected), accepted
    return Reads(target_rows, draft_rows, target_passes, draft_passes, target_gathers + draft_gathers)


def block_reads(accepted: int, weights: list[float], uniforms: list[float], target_logits: bool, draft_logits: bool,
                minimal: bool) -> Reads:
    n = len(weights) - 1
    # rows whose p_i(x_i), q_i(x_i) feed a weight that matters: 0..n-1, or up to the first zero weight w_z
    # (w_z = 0 makes every later w and h zero: their tests fail unread)
    last = n - 1
    if minimal:
        last = next((i - 1 for i in range(1, n + 1) if weights[i] == 0.0), n - 1)
    # the backward pass: test i < n needs r_i = sum max(w_i p_i - q_i, 0) (rows p_i, q_i whole) for i = n-1
    # down to the first test that passes (A); test n is u_{n-1} < w_n, two values. Skipped when minimal: a
    # test already decided, u_{i-1} >= w_i >= h_i, or past the first zero weight
    residual = set(range(max(accepted, 1), n))
    if minimal:
        residual = {i for i in residual if i <= last and (i == accepted or uniforms[i - 1] < weights[i])}
    # the terminal row's race: max(w_A p_A - q_A, 0) at A < n (fused with r_A's pass), the bonus over p_n at A = n
    raced = residual | ({accepted} if accepted < n else set())
    statistics = set(range(last + 1))
    bonus = int(accepted == n)
    if target_logits:
        target_rows, target_passes = len(statistics | raced) + bonus, len(statistics) + len(raced) + bonus
    else:
        target_rows = target_passes = len(raced) + bonus
    if draft_logits:
        draft_rows, draft_passes = len(statistics | raced), len(statistics) + len(raced)
    else:
        draft_rows = draft_passes = len(raced)
    gathers = (0 if target_logits else last + 1) + (0 if draft_logits else last + 1)
    return Reads(target_rows, draft_rows, target_passes, draft_passes, gathers)


def _at_drafts(rows: torch.Tensor, drafts: torch.Tensor, logits: bool) -> torch.Tensor:
    # [B, K] float64: each slot's row at its draft, as the rule reads it (softmax at T = 1; probabilities as given)
    values = []
    for i in range(drafts.shape[1]):
        row = oracle.softmax(rows[:, i], 1.0) if logits else oracle.clean_probs(rows[:, i])
        values.append(row.gather(1, drafts[:, i, None])[:, 0])
    return torch.stack(values, dim=1).cpu()


def request_facts(inputs: bench.CaseInputs) -> tuple[list[int], list[int], list[list[float]], list[list[float]]]:
    """Per request: ``A`` under the token rule and under block (the torch reference), ``w_0..w_n``, ``u_0..u_{n-1}``."""
    kwargs = inputs.verify_kwargs()
    accepted = {method: verify(**{**kwargs, "method": method}, backend="torch").num_accepted.cpu().tolist()
                for method in ("token", "block")}
    target = kwargs.get("target_probs")
    target_logits = target is None
    if target_logits:
        target = kwargs["target_logits"]
    draft = kwargs["draft_logits"] if kwargs["draft_logits"] is not None else kwargs["draft_probs"]
    drafts = kwargs["draft_token_ids"]
    p_draft = _at_drafts(target[:, :-1], drafts, target_logits)
    q_draft = _at_drafts(draft, drafts, kwargs["draft_logits"] is not None)
    weights = [oracle.block_weights(p, q) for p, q in zip(p_draft.tolist(), q_draft.tolist(), strict=True)]
    seeds, positions = kwargs["seeds"], kwargs["positions"]
    slots = torch.arange(drafts.shape[1], device=seeds.device)
    uniforms = rng.uniform(seeds[:, None], positions[:, None] + slots[None, :], rng.ACCEPT).cpu().tolist()
    return accepted["token"], accepted["block"], weights, uniforms


def small_bytes(batch: int, num_spec: int) -> int:
    # bench.bytes_moved's per-request small tensors: ids and outputs, counts, seed, position, temperature
    return batch * (num_spec * 8 + (num_spec + 1) * 8 + 4 + 4) + batch * (4 + 8 + 8 + 4)


def case_rows(case: bench.Case, device: torch.device, gbps: float, show: int) -> list[str]:
    inputs = bench.make_inputs(case, device, seed=0)
    token_accepted, block_accepted, weights, uniforms = request_facts(inputs)
    del inputs
    n, vocab, elem = case.num_spec_tokens, case.vocab_size, bench.DTYPES[case.dtype].itemsize
    target_logits, draft_logits = case.target == "logits", case.draft == "logits"
    lines = []
    for index in range(min(show, case.batch_size)):
        token = token_reads(token_accepted[index], n, target_logits, draft_logits)
        block = block_reads(block_accepted[index], weights[index], uniforms[index], target_logits, draft_logits, False)
        least = block_reads(block_accepted[index], weights[index], uniforms[index], target_logits, draft_logits, True)
        lines.append(f"    request {index}: A token {token_accepted[index]} block {block_accepted[index]}; "
                     f"w {[round(w, 3) for w in weights[index]]}; u {[round(u, 3) for u in uniforms[index]]}; "
                     f"rows (target+draft) token {token.target_rows}+{token.draft_rows} block "
                     f"{block.target_rows}+{block.draft_rows} block-min {least.target_rows}+{least.draft_rows}")
    # the weights and uniforms must agree with the reference's A: test A (0 < A) passes, so u_{A-1} < h_A <= w_A;
    # below n, test n failed, so u_{n-1} >= w_n (float32 against float64: a tie may flip one)
    odd = sum((0 < a and u[a - 1] >= w[a]) or (a < n and u[n - 1] < w[n])
              for a, w, u in zip(block_accepted, weights, uniforms, strict=True))
    lines.append(f"  block's A against u and w: {odd} of {case.batch_size} requests disagree")
    small = small_bytes(case.batch_size, n)
    for rule in RULES:
        accepted = token_accepted if rule == "token" else block_accepted
        reads = [token_reads(a, n, target_logits, draft_logits) if rule == "token" else
                 block_reads(a, w, u, target_logits, draft_logits, rule == "block-min")
                 for a, w, u in zip(accepted, weights, uniforms, strict=True)]
        rows = sum(r.target_rows + r.draft_rows for r in reads)
        passes = sum(r.target_passes + r.draft_passes for r in reads)
        gathered = sum(r.gathers for r in reads) * elem
        unique_bytes = rows * vocab * elem + gathered + small
        pass_bytes = passes * vocab * elem + gathered + small
        # what a kernels row of this rule records as bytes_needed
        counted, _ = bench.bytes_moved(replace(case, method="token" if rule == "token" else "block"),
                                       torch.tensor(accepted))
        mark = "" if rule != "token" or counted == unique_bytes else "  (differs from bytes_moved!)"
        lines.append(
            f"  {rule:<9} L {1 + sum(accepted) / len(accepted):5.2f}  rows/request {rows / case.batch_size:5.2f}  "
            f"passes/request {passes / case.batch_size:5.2f}  unique {unique_bytes / 1e6:9.3f} MB "
            f"{bench.dram_floor_us(unique_bytes, gbps):8.2f} us  passes {pass_bytes / 1e6:9.3f} MB "
            f"{bench.dram_floor_us(pass_bytes, gbps):8.2f} us  bytes_moved {counted / 1e6:9.3f} MB{mark}")
    return lines


def lab_cases(batch: int | None, vocab: int | None) -> list[bench.Case]:
    """The cases of ``run.sh time``, one per shape, inputs and form (the method does not change the inputs)."""
    cases = []
    for inputs, noise, length in (("natural", 1.0, None), ("planned", None, 3.0)):
        for default_batch, num_spec, model in SHAPES:
            profile = scenarios.make_profile(num_spec, acceptance_length=length if length else num_spec + 1.0)
            for form in ("logits", "probs"):
                cases += bench.plan_cases(
                    modes=["probabilistic"], batch_sizes=[batch or default_batch],
                    vocabularies=[(None if vocab else model, vocab or VOCABS[model])], profiles=[profile],
                    drafts=[form], targets=[form], inputs=inputs, draft_noise=noise)
    return list(dict.fromkeys(cases))  # --batch and --vocab can make two shapes one


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gbps", type=float, help="copy bandwidth for the floor (default: measured on the GPU, "
                        f"else {H200_COPY_GBPS:g}, the H200's)")
    parser.add_argument("--batch", type=int, help="every shape's B instead of the issue's (small, for a CPU check)")
    parser.add_argument("--vocab", type=int, help="every shape's V instead of the model's (small, for a CPU check)")
    parser.add_argument("--show", type=int, default=0, help="print the first N requests of each case in full")
    args = parser.parse_args()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    gbps = args.gbps or (timing.peak_bandwidth_gbps("cuda") if device.type == "cuda" else None) or H200_COPY_GBPS
    print(f"device {device}; floor at {gbps:,.0f} GB/s (bytes over the copy bandwidth); unique: each row once; "
          f"passes: each row once per pass")
    for case in lab_cases(args.batch, args.vocab):
        label = f"natural noise={case.draft_noise:g}" if case.inputs == "natural" else "planned L=3"
        print(f"{case.target}/{case.draft} B={case.batch_size} K={case.num_spec_tokens} V={case.vocab_size} "
              f"{case.dtype} {label}")
        for line in case_rows(case, device, gbps, args.show):
            print(line)


if __name__ == "__main__":
    main()
