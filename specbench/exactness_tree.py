"""``specbench verify --tree SHAPE``: the exactness suite for tree samplers (``specbench/verification.py``, "Trees").

Every request of a check holds the same tree (``SHAPE``, ``specbench.trees.parse_tree_shape``), the same rows
(``V = 16``) and its own seed; the candidates are drawn per request from the laws they are declared to come
from. What is tested, for an implementation that declares ``trees``:

- Token laws per depth (probabilistic): the token in output slot ``i`` of the requests whose path reaches
  depth ``i`` (``A >= i``) against the float64 oracle's law (``specbench.oracle_tree.fixed_rows_law``), one
  chi-square test per slot, for independent candidates (draft probabilities, and draft logits at ``T =
  0.7``), candidates drawn without replacement (siblings share one row; Gumbel-top-k draws, in rank
  order) and one-hot candidates (fixed tokens). The oracle computes the law of the walk itself, rows fixed
  per node, so a rule that ignores ``q`` or forgets to renormalise after a rejected sibling shows.
- The accepted-depth law: the histogram of ``num_accepted`` against ``P(A = a)``.
- Paths: ``accepted_nodes`` is a path from the root whose tokens are the output's first ``A`` tokens.
- Greedy identity: tokens, counts and paths equal to the torch reference's, on rows with ties, NaN and
  ``+-inf`` (the greedy mode, and temperature-0 requests of the probabilistic mode).
- Synthetic mode: the token laws and the accepted-depth law of the positional rates.
- Ragged trees and absent nodes (where ``ragged`` and ``invalid_drafts`` are declared): requests cut to
  their first ``n_b`` nodes in one batch, some nodes ``-1``: nothing past a count and no absent node
  accepted, paths hold, and the first token still follows the root's row.
- Where the implementation declares specbench's random streams, and in the greedy mode for any implementation
  (its outputs depend on no draw): a chain given as a tree equals the chain (tokens and counts, bit for bit),
  and its tree outputs equal the reference's.

Statistical checks share one Bonferroni budget with the rest of the run (``exactness.Suite``'s).

Limits: the probabilistic mode takes at most ``MAX_PROBABILISTIC_CHILDREN`` children a node (``check_tree_modes``:
the oracle of candidates drawn without replacement grows by about ``V`` with each more), and ``--samples`` is held
to memory by the tree's size (``check_tree_samples``: the torch reference holds ``N x N`` tables a request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from specbench import oracle, rng
from specbench.errors import SpecbenchError
from specbench.exactness import BYTES_PER_REQUEST, Suite, _Broken, check_samples
from specbench.exactness_base import VOCAB, CheckResult, _chi_square_check, _chi_square_counts, _reference
from specbench.oracle_tree import fixed_rows_law
from specbench.trees import DraftTree, check_parents, children, depths
from specbench.verification import VerifyResult


@dataclass(frozen=True)
class _TreeConfig:
    label: str
    temperature: float
    draft_kind: str  # probs, logits, none (one-hot candidates: fixed tokens)
    candidates: str = "independent"


TREE_CONFIGS = (
    _TreeConfig("independent candidates, draft probs", 1.0, "probs"),
    _TreeConfig("independent candidates, T=0.7 draft logits", 0.7, "logits"),
    _TreeConfig("candidates without replacement, draft logits", 1.0, "logits", "without_replacement"),
    _TreeConfig("one-hot candidates (fixed tokens)", 1.0, "none"),
)
SYNTHETIC_RATES = (0.7, 0.5, 0.4)  # conditional, by rank; the same at every depth
# The oracle of candidates drawn without replacement follows every order in which a place's children can be
# rejected: up to V! / (V - W)! states for W children. `verify --tree Wx1 -m probabilistic --impl torch -n 200`
# on a 2-core CPU took 3.1 s for 6 children, 146 s for 7, and more than 10 min for 8.
MAX_PROBABILISTIC_CHILDREN = 6
# The torch reference, the yardstick of several checks, holds [B, N, N] tables: peak host memory measured 10.5 MB a
# request for N = 1024 (`verify --tree 1024x1 -m greedy -n 2000`: 21.2 GB), about 10 N^2 bytes.
BYTES_PER_NODE_PAIR = 12


def check_tree_samples(samples: int, parents: Sequence[int], device: torch.device | str) -> int:
    """``exactness.check_samples`` for a suite on the tree ``parents``: each request takes
    ``BYTES_PER_REQUEST + BYTES_PER_NODE_PAIR * N^2`` bytes (``N`` nodes)."""
    num_nodes = len(parents)
    return check_samples(samples, device, BYTES_PER_REQUEST + BYTES_PER_NODE_PAIR * num_nodes**2,
                         f" for a tree of {num_nodes} nodes, whose torch reference holds {num_nodes} x {num_nodes} "
                         f"tables")


def check_tree_modes(parents: Sequence[int], modes: Sequence[str], label: str | None = None) -> None:
    """Raise ``SpecbenchError`` when ``modes`` holds ``probabilistic`` and a place of the tree ``parents`` (named
    ``label`` in the sentence, default ``parents:...``) has more than ``MAX_PROBABILISTIC_CHILDREN`` children:
    that mode's exact law would take minutes to hours. The greedy and synthetic modes check any tree."""
    if "probabilistic" not in modes:
        return
    kids = children(check_parents(parents))
    widest = max(range(len(kids)), key=lambda place: len(kids[place]))
    width = len(kids[widest])
    if width > MAX_PROBABILISTIC_CHILDREN:
        where = "the root" if widest == 0 else f"node {widest - 1}"
        label = label or "parents:" + ",".join(map(str, parents))
        raise SpecbenchError(
            f"{where} of tree {label} has {width} children, more than the {MAX_PROBABILISTIC_CHILDREN} the "
            f"probabilistic mode can check (its exact law of candidates drawn without replacement follows every "
            f"order of rejected siblings: on a 2-core CPU 7 children took 146 s and 8 more than 10 minutes); "
            f"check this tree with --mode greedy,synthetic, which take any tree")


class TreeSuite(Suite):
    """``exactness.Suite`` with the tree checks (module docstring) for one tree shape, ``parents``."""

    def __init__(self, impl, device: torch.device, modes: list[str], parents: list[int], **kwargs: Any) -> None:
        if impl.trees:  # (a sampler without trees skips every check)
            check_tree_modes(parents, modes)
        super().__init__(impl, device, modes, **kwargs)
        self.parents = check_parents(parents)
        self.kids = children(self.parents)
        self.depth = max(depths(self.parents)) + 1

    def _run_checks(self) -> None:
        for mode in self.modes:
            reason = self.impl.unsupported(mode, self.device)
            if not reason and not self.impl.trees:
                reason = f"{self.impl.name} does not declare trees"
            if not reason and self.method != "token":
                reason = f"tree verification follows the token method only, not {self.method}"
            if reason:
                self.results.append(CheckResult("all checks", mode, "skipped", "-", detail=reason))
                continue
            if mode == "probabilistic":
                for index, config in enumerate(TREE_CONFIGS):
                    self._guard(f"tree laws ({config.label})", mode, self._tree_law, config, index)
                self._guard("tree greedy identity (temperature-0 rows)", mode, self._tree_greedy, mode)
            if mode == "greedy":
                self._guard("tree greedy identity (ties, NaN, +-inf)", mode, self._tree_greedy, mode)
            if mode == "synthetic":
                self._guard("tree laws (positional rates)", mode, self._tree_synthetic)
            self._declared("ragged trees and absent nodes", mode, self.impl.ragged and self.impl.invalid_drafts,
                           self._ragged_trees)
            drawless = self.impl.same_rng or mode == "greedy"  # (greedy outputs depend on no random stream)
            self._declared("a chain as a tree equals the chain", mode, drawless, self._chain_as_tree)
            self._declared("same tree outputs as the reference (specbench streams)", mode, drawless,
                           self._same_tree_streams)

    # --- inputs -------------------------------------------------------------------------------------------------

    def _tree_call(self, kwargs: dict[str, Any]) -> VerifyResult:
        result = self._call(kwargs)
        if result.accepted_nodes is None or list(result.accepted_nodes.shape) != list(kwargs["draft_token_ids"].shape):
            got = None if result.accepted_nodes is None else list(result.accepted_nodes.shape)
            raise _Broken(f"returned accepted_nodes {got}, expected {list(kwargs['draft_token_ids'].shape)}")
        return result

    def _tree_kwargs(self, mode: str, target: torch.Tensor, drafts: torch.Tensor, temperature: float | torch.Tensor,
                     candidates: str = "independent", **given: torch.Tensor) -> dict[str, Any]:
        n = drafts.shape[0]
        device = self.device
        temperatures = temperature if isinstance(temperature, torch.Tensor) else torch.full((n,), temperature)
        seeds = rng.request_seed(self.seed, torch.arange(n, dtype=torch.int64))
        expand = lambda rows: rows.expand(n, *rows.shape[-2:]).contiguous().to(device)
        kwargs = {"mode": mode, "target_logits": expand(target), "draft_token_ids": drafts.to(device),
                  "temperatures": temperatures.to(torch.float32).to(device), "seeds": seeds.to(device),
                  "tree": DraftTree(torch.tensor(self.parents, dtype=torch.int64, device=device).expand(n, -1)
                                    .contiguous(), candidates)}
        kwargs.update({name: expand(rows) for name, rows in given.items()})
        return kwargs

    def _tree_rows(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Target logits ``[N + 1, V]`` and each node's draft logits ``[N, V]``: close to its parent's target
        row, and the same for siblings (what drafting without replacement needs)."""
        gen = torch.Generator().manual_seed(self.seed * 1000 + 500 + index)
        target = torch.randn(len(self.parents) + 1, VOCAB, generator=gen) * 1.5
        place_draft = target + torch.randn(target.shape, generator=gen) * 0.5
        owner = torch.tensor([parent + 1 for parent in self.parents], dtype=torch.int64)
        return target, place_draft[owner]

    def _draw_candidates(self, q: torch.Tensor, candidates: str, n: int, index: int) -> torch.Tensor:
        """``[n, N]`` candidate tokens: each node's from its row ``q`` ``[N, V]`` (float64), independently, or a
        place's children together without replacement (Gumbel-top-k of their shared row, in rank order)."""
        gen = torch.Generator().manual_seed(self.seed * 7919 + 300 + index)
        drafts = torch.empty(n, len(self.parents), dtype=torch.int64)
        if candidates == "independent":
            for node in range(len(self.parents)):
                drafts[:, node] = torch.multinomial(q[node].float(), n, replacement=True, generator=gen)
            return drafts
        for kids in self.kids:
            if kids:
                gumbel = -torch.log(-torch.log(torch.rand(n, VOCAB, generator=gen, dtype=torch.float64)))
                order = (torch.log(q[kids[0]])[None, :] + gumbel).topk(len(kids), dim=1).indices
                drafts[:, kids] = order
        return drafts

    # --- the checks ---------------------------------------------------------------------------------------------

    def _tree_law(self, config: _TreeConfig, index: int) -> list[CheckResult]:
        target, draft_logits = self._tree_rows(index)
        n, temperature = self.samples, config.temperature
        p = torch.stack([oracle.softmax(row, temperature) for row in target]).numpy()  # [N + 1, V] float64
        q = torch.stack([oracle.softmax(row, temperature) for row in draft_logits])  # [N, V]
        if config.draft_kind == "none":
            # fixed tokens: each place's children take its target's most likely tokens, in order
            tokens = [0] * len(self.parents)
            for place, kids in enumerate(self.kids):
                for rank, node in enumerate(kids):
                    tokens[node] = int(np.argsort(-p[place], kind="stable")[rank % VOCAB])
            drafts = torch.tensor(tokens, dtype=torch.int64).expand(n, -1).contiguous()
            law = fixed_rows_law(self.parents, p, tokens=tokens)
            given = {}
        else:
            drafts = self._draw_candidates(q, config.candidates, n, index)
            law = fixed_rows_law(self.parents, p, draft_rows=q.numpy(), candidates=config.candidates)
            given = {"draft_probs": q.to(torch.float32)} if config.draft_kind == "probs" else \
                {"draft_logits": draft_logits}
        kwargs = self._tree_kwargs("probabilistic", target, drafts, temperature, config.candidates, **given)
        result = self._tree_call(kwargs)
        return self._law_checks(result, drafts, law, config.label)

    def _law_checks(self, result: VerifyResult, drafts: torch.Tensor, law, label: str) -> list[CheckResult]:
        checks = [self._paths(result, drafts, f"paths and tokens agree ({label})")]
        for slot in range(self.depth + 1):
            reached = result.num_accepted >= slot
            checks.append(_chi_square_check(f"token law, depth {slot} ({label})",
                                            result.output_token_ids[reached, slot],
                                            torch.from_numpy(law.slot_laws[slot])))
        observed = torch.bincount(result.num_accepted.clamp(0, self.depth), minlength=self.depth + 1)
        depth_check = _chi_square_counts(f"accepted-depth law ({label})", observed,
                                         torch.from_numpy(law.accepted_law))
        measured = (observed.double() / max(int(observed.sum()), 1)).tolist()
        depth_check.detail = ("P(A = a) measured " + ", ".join(f"{m:.3f}" for m in measured) + "; due " +
                              ", ".join(f"{d:.3f}" for d in law.accepted_law) + f"; {depth_check.detail}")
        checks.append(depth_check)
        return checks

    def _paths(self, result: VerifyResult, drafts: torch.Tensor, name: str) -> CheckResult:
        """Exact: each request's ``accepted_nodes`` is a root path of ``A`` nodes carrying the output's tokens."""
        parents = torch.tensor([-1, *self.parents], dtype=torch.int64)  # parents[j + 1] of node j
        nodes, accepted = result.accepted_nodes, result.num_accepted
        slots = torch.arange(nodes.shape[1])[None, :]
        inside = slots < accepted[:, None]
        wrong = ((nodes >= 0) != inside).any(dim=1) | (nodes >= len(self.parents)).any(dim=1)
        safe = nodes.clamp(0, len(self.parents) - 1)
        previous = torch.cat([torch.full_like(nodes[:, :1], -1), nodes[:, :-1]], dim=1)
        wrong |= (inside & (parents[safe + 1] != previous)).any(dim=1)
        wrong |= (inside & (drafts.gather(1, safe) != result.output_token_ids[:, :nodes.shape[1]])).any(dim=1)
        count = int(wrong.sum())
        detail = f"{count} of {len(wrong)} requests' accepted_nodes are not the emitted path" if count else \
            "every accepted_nodes is a root path carrying the emitted tokens"
        return CheckResult(name, "", "FAIL" if count else "pass", "exact", samples=len(wrong), detail=detail)

    def _tree_greedy(self, mode: str) -> list[CheckResult]:
        gen = torch.Generator().manual_seed(self.seed + 17)
        n, num_nodes = self._few(64), len(self.parents)
        target = torch.randn(n, num_nodes + 1, VOCAB, generator=gen)
        target[0::4, :, 3] = target[0::4, :, 5] = 9.0  # a tie: the lowest id wins
        target[1::4, :, 2] = float("nan")
        target[2::4, :, 7] = target[2::4, :, 9] = float("inf")
        target[3::4, :, 0] = float("-inf")
        top = target.nan_to_num(nan=float("-inf"), posinf=3e38).argmax(dim=-1)  # [n, N + 1]
        owner = torch.tensor([parent + 1 for parent in self.parents], dtype=torch.int64)
        drafts = torch.where(torch.rand(n, num_nodes, generator=gen) < 0.5, top[:, owner],
                             torch.randint(0, VOCAB, (n, num_nodes), generator=gen))
        kwargs = {"mode": mode, "target_logits": target.to(self.device), "draft_token_ids": drafts.to(self.device),
                  "temperatures": torch.zeros(n, dtype=torch.float32, device=self.device),
                  "seeds": torch.arange(n, dtype=torch.int64, device=self.device),
                  "tree": DraftTree(torch.tensor(self.parents, device=self.device).expand(n, -1).contiguous())}
        if mode == "probabilistic":
            kwargs["draft_probs"] = torch.softmax(torch.randn(n, num_nodes, VOCAB, generator=gen), -1).to(self.device)
        return [_tree_equal(self._tree_call(kwargs), _reference(kwargs), n)]

    def _tree_synthetic(self) -> list[CheckResult]:
        target, _ = self._tree_rows(len(TREE_CONFIGS))
        gen = torch.Generator().manual_seed(self.seed + 29)
        n = self.samples
        # candidates uniform over the vocabulary: the profile, not the rows, decides acceptance
        drafts = torch.randint(0, VOCAB, (n, len(self.parents)), generator=gen)
        rates = [list(SYNTHETIC_RATES)] * self.depth
        kwargs = self._tree_kwargs("synthetic", target, drafts, 1.0)
        kwargs["acceptance_rates"] = rates
        result = self._tree_call(kwargs)
        p = torch.softmax(target.double(), -1).numpy()
        uniform = np.full((len(self.parents), VOCAB), 1.0 / VOCAB)
        law = fixed_rows_law(self.parents, p, draft_rows=uniform, rates=rates)
        return self._law_checks(result, drafts, law, "positional rates")

    def _ragged_trees(self, mode: str) -> list[CheckResult]:
        """Requests cut to their first ``n_b`` nodes (0 included) and absent (``-1``) nodes in one batch: nothing
        past a request's nodes or absent is accepted, paths hold; the first token still follows ``p_root``."""
        gen = torch.Generator().manual_seed(self.seed + 53)
        n, num_nodes = self.samples, len(self.parents)
        target, draft_logits = self._tree_rows(1)
        q = torch.stack([oracle.softmax(row, 1.0) for row in draft_logits])
        drafts = self._draw_candidates(q, "independent", n, 77)
        drafts = torch.where(torch.rand(n, num_nodes, generator=gen) < 0.15, -1, drafts)
        counts = torch.randint(0, num_nodes + 1, (n,), generator=gen)
        given = {"draft_probs": q.to(torch.float32)} if mode == "probabilistic" else {}
        kwargs = self._tree_kwargs(mode, target, drafts, 0.0 if mode == "greedy" else 1.0, **given)
        kwargs["num_draft_tokens"] = counts.to(self.device)
        if mode == "synthetic":
            kwargs["acceptance_rates"] = [list(SYNTHETIC_RATES)]
        result = self._tree_call(kwargs)
        nodes = result.accepted_nodes
        safe = nodes.clamp(min=0)
        beyond = ((nodes >= counts[:, None]) | ((nodes >= 0) & (drafts.gather(1, safe) < 0))).any(dim=1)
        count = int(beyond.sum())
        detail = f"{count} of {n} requests accepted a node past their count or an absent one" if count else \
            "no node past a request's count and no absent node accepted"
        checks = [CheckResult("ragged trees: nothing past the count or absent accepted", "", "FAIL" if count else
                              "pass", "exact", samples=n, detail=detail),
                  self._paths(result, drafts, "ragged trees: paths and tokens agree")]
        if mode == "probabilistic":  # whatever the tree, the first token follows the root's target row
            checks.append(_chi_square_check("ragged trees: token law, depth 0", result.output_token_ids[:, 0],
                                            oracle.softmax(target[0], 1.0)))
        return checks

    def _chain_as_tree(self, mode: str) -> list[CheckResult]:
        kwargs = self._small_batch(mode, self._few(256))
        num_drafts = kwargs["draft_token_ids"].shape[1]
        n = kwargs["draft_token_ids"].shape[0]
        chain = _reference(kwargs)
        tree_kwargs = dict(kwargs, tree=DraftTree(torch.arange(-1, num_drafts - 1, device=self.device)
                                                  .expand(n, -1).contiguous()))
        if mode == "synthetic":
            from specbench import acceptance

            tree_kwargs["acceptance_rates"] = [[c] for c in acceptance.conditional_rates(kwargs["acceptance_rates"])]
        got = self._tree_call(tree_kwargs)
        return [_tree_equal(got._replace(accepted_nodes=None), chain, n)]

    def _same_tree_streams(self, mode: str) -> list[CheckResult]:
        gen = torch.Generator().manual_seed(self.seed + 41)
        n, num_nodes = self._few(512), len(self.parents)
        target, draft_logits = self._tree_rows(0)
        temperatures = torch.where(torch.rand(n, generator=gen) < 0.2, 0.0, 0.5 + torch.rand(n, generator=gen))
        if mode == "greedy":
            temperatures = torch.zeros(n)
        q = torch.stack([oracle.softmax(row, 1.0) for row in draft_logits])
        drafts = self._draw_candidates(q, "independent", n, 99)
        given = {"draft_logits": draft_logits} if mode == "probabilistic" else {}
        kwargs = self._tree_kwargs(mode, target, drafts, temperatures, **given)
        kwargs["num_draft_tokens"] = torch.randint(0, num_nodes + 1, (n,), generator=gen).to(self.device)
        kwargs["positions"] = torch.randint(0, 1000, (n,), generator=gen).to(self.device)
        if mode == "synthetic":
            kwargs["acceptance_rates"] = [list(SYNTHETIC_RATES)]
        return [_tree_equal(self._tree_call(kwargs), _reference(kwargs), n)]


def _tree_equal(got: VerifyResult, want: VerifyResult, n: int) -> CheckResult:
    """Exact equality of tokens, counts and (when both have them) accepted nodes."""
    wrong = (got.output_token_ids != want.output_token_ids).any(dim=1) | (got.num_accepted != want.num_accepted) \
        | (got.num_emitted != want.num_emitted)
    if got.accepted_nodes is not None and want.accepted_nodes is not None:
        wrong |= (got.accepted_nodes != want.accepted_nodes).any(dim=1)
    count = int(wrong.sum())
    detail = f"{count} of {n} requests differ from the torch reference" if count else "tokens, counts and paths equal"
    if count:
        first = int(wrong.nonzero()[0, 0])
        detail += (f" (request {first}: {got.output_token_ids[first].tolist()} where "
                   f"{want.output_token_ids[first].tolist()} was due)")
    return CheckResult("", "", "FAIL" if count else "pass", "exact", samples=n, detail=detail)
