"""The Triton tree kernel (``specbench/kernels/tree.py``) against the torch reference: the same tokens, counts and
accepted nodes, bit for bit, in every mode, draft form and candidate rule, with ragged trees, absent nodes, greedy
and invalid requests, invalid rows and unchecked parents in the batch; a chain given as a tree equals the Triton
chain kernels; a tree of no nodes emits the bonus. Under the interpreter (no GPU) the batches are small."""

from __future__ import annotations

import importlib
import math

import pytest
import torch
from conftest import _backend_context, device_for, hostile_draft_probs, interpreted, triton_launch

from specbench.trees import DraftTree, batched
from specbench.verification import verify

# a bushy tree (three children at the root, two under node 3, a grandchild) and one with a repeated level
TREES = {"bushy": [-1, -1, -1, 0, 3, 3, 5], "2x2": [-1, -1, 0, 0, 1, 1]}
FORMS = ["greedy", "one-hot", "draft logits", "draft probs", "target probs", "target probs, draft logits",
         "target probs, one-hot", "synthetic", "without replacement, draft logits", "without replacement, one-hot",
         "without replacement, draft probs"]
VOCAB = 13


@pytest.fixture(autouse=True)
def _needs_triton():
    triton_launch()


def _batch() -> int:
    return 14 if interpreted("triton") else 600


def _tree_call(form: str, parents: list[int], batch: int, seed: int = 0, vocab: int = VOCAB) -> tuple[dict, DraftTree]:
    """verify's keywords for one form: sampled drafts, greedy, NaN-temperature (invalid) requests, ragged
    counts, absent and out-of-range drafts, an invalid row, parents left unchecked past each count."""
    generator = torch.Generator().manual_seed(seed)
    num_nodes = len(parents)
    logits = torch.randn(batch, num_nodes + 1, vocab, generator=generator) * 2
    owner_rows = torch.tensor([parent + 1 for parent in parents])
    draft_logits = logits[:, owner_rows] + torch.randn(batch, num_nodes, vocab, generator=generator)
    temperatures = torch.rand(batch, generator=generator) + 0.4
    temperatures[::5] = 0.0
    temperatures[3::11] = math.nan
    drafts = torch.multinomial(torch.softmax(draft_logits, -1).reshape(-1, vocab), 1, generator=generator)
    drafts = drafts.reshape(batch, num_nodes)
    drafts[::4, 1] = -1
    drafts[1::6, 0] = vocab + 3
    logits[2::7, 1] = float("-inf")  # node 0's row: a walk that reaches it stops there
    counts = torch.randint(0, num_nodes + 1, (batch,), generator=generator)
    counts[:3] = num_nodes
    tree_parents = torch.tensor([parents] * batch)
    tree_parents[counts < num_nodes - 1, -1] = 42  # padding past the count: never read
    kwargs = {"draft_token_ids": drafts, "num_draft_tokens": counts, "temperatures": temperatures,
              "seeds": torch.randint(0, 2**40, (batch,), generator=generator),
              "positions": torch.randint(0, 1000, (batch,), generator=generator), "check_values": False}
    target = {"target_logits": logits}
    if form.startswith("target probs"):
        target = {"target_probs": torch.softmax(logits, -1)}
    if form.endswith("draft logits"):
        kwargs["draft_logits"] = draft_logits
    elif form.endswith("draft probs") or form == "target probs":
        kwargs["draft_probs"] = torch.softmax(draft_logits, -1)
    if form == "greedy":
        kwargs.update(mode="greedy", temperatures=None)
    elif form == "synthetic":
        kwargs.update(mode="synthetic", acceptance_rates=[[0.9, 0.5, 0.3], [0.7, 0.2, 0.1], [0.6, 0.6, 0.6]])
    candidates = "without_replacement" if form.startswith("without replacement") else "independent"
    return {**target, **kwargs}, DraftTree(tree_parents, candidates)


def _on(device: torch.device, kwargs: dict) -> dict:
    return {key: value.to(device) if isinstance(value, torch.Tensor) else value for key, value in kwargs.items()}


@pytest.mark.parametrize("form", FORMS)
def test_the_triton_tree_kernel_is_the_reference_bit_for_bit(form):
    device = device_for("triton")
    for name, parents in TREES.items():
        kwargs, tree = _tree_call(form, parents, _batch(), seed=len(parents))
        want = verify(**kwargs, tree=tree, backend="torch")
        got = verify(**_on(device, kwargs), tree=DraftTree(tree.parents.to(device), tree.candidates), backend="triton")
        for field in ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes"):
            assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, name, field)
        assert 0 < float(want.num_accepted.float().mean()) < len(parents)  # neither nothing nor everything
    assert got.accepted_nodes.dtype == torch.int32


@pytest.mark.parametrize("form", ["greedy", "one-hot", "draft logits", "draft probs", "target probs",
                                  "target probs, draft logits", "without replacement, draft logits"])
def test_the_split_tree_path_is_the_reference_bit_for_bit(form):
    # the rows' statistics split across programs (2100 tokens: three slices under the interpreter), the walk in
    # each request's last program, the final race split again
    launch = triton_launch()
    device = device_for("triton")
    batch = 8 if interpreted("triton") else 300
    kwargs, tree = _tree_call(form, TREES["bushy"], batch, seed=5, vocab=2100)
    # half the requests draft the argmax of every test row: walks that go deep, besides early rejections
    target = kwargs.get("target_logits", kwargs.get("target_probs"))
    argmaxes = target[:, [parent + 1 for parent in TREES["bushy"]]].argmax(-1)
    kwargs["draft_token_ids"][::2] = argmaxes[::2]
    want = verify(**kwargs, tree=tree, backend="torch")
    with launch.strategy("split"):
        got = verify(**_on(device, kwargs), tree=DraftTree(tree.parents.to(device), tree.candidates), backend="triton")
    for field in ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes"):
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, field)
    assert 0 < int(want.num_accepted.sum()) and int((want.num_emitted > want.num_accepted).sum()) > 0
    # the launches leave their counters (the finish kernel's tickets, the arrivals) at zero
    assert all(int(counters.abs().sum()) == 0 for counters in launch._arrivals.values())


@pytest.mark.parametrize("split", [False, True])
def test_hostile_draft_probabilities_are_read_cleaned_on_both_tree_paths(split):
    # -inf, negative, NaN, +inf and above-1 draft probabilities: the reference and the kernel give what the call
    # with the contract's cleaned values gives (0 below 0 and for NaN, 1 above 1), bit for bit
    launch = triton_launch()
    device = device_for("triton")
    batch = 8 if interpreted("triton") else 300
    kwargs, tree = _tree_call("draft probs", TREES["bushy"], batch, seed=11, vocab=2100 if split else VOCAB)
    kwargs["draft_probs"], cleaned = hostile_draft_probs(kwargs["draft_probs"], kwargs["draft_token_ids"], seed=3)
    want = verify(**{**kwargs, "draft_probs": cleaned}, tree=tree, backend="torch")
    from_reference = verify(**kwargs, tree=tree, backend="torch")
    with launch.strategy("split" if split else "auto"):
        got = verify(**_on(device, kwargs), tree=DraftTree(tree.parents.to(device), tree.candidates), backend="triton")
    for field in ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes"):
        assert torch.equal(getattr(from_reference, field), getattr(want, field)), field
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), field


@pytest.mark.parametrize(("name", "kernels", "block", "warps"), [("triton-sequential-1024x4", ("_TREE",), 1024, 4),
                                                               ("triton-split-2048x8", ("_TREE_ROWS", "_TREE_FINISH"),
                                                                2048, 8)])
def test_a_launch_shape_variant_verifies_trees_at_its_shape(name, kernels, block, warps, monkeypatch):
    # `specbench kernels --tree ... --impl triton-sequential-BxW` times the tree kernels at that shape: the variant's
    # shape is the launcher's (launch.TUNING) while each tree kernel launches, and on a GPU the launch's own (the
    # interpreter takes its own small blocks; neither shape is the launcher's default at B = 8)
    from specbench.implementations import resolve

    launch = triton_launch()
    device = device_for("triton")
    shapes = {kernel: [] for kernel in kernels}

    def counted(kernel, launcher):
        def launch_counted(grid, args, num_warps, stream, **constexprs):
            shapes[kernel].append((launch.TUNING["block"], launch.TUNING["num_warps"], constexprs["BLOCK"], num_warps))
            launcher(grid, args, num_warps, stream, **constexprs)

        return launch_counted

    for kernel in kernels:
        monkeypatch.setattr(launch, kernel, counted(kernel, getattr(launch, kernel)))
    kwargs, tree = _tree_call("draft logits", TREES["bushy"], 8, seed=3, vocab=2100)
    want = verify(**kwargs, tree=tree, backend="torch")
    variant = resolve(name)
    assert variant.trees
    got = variant.bind({**_on(device, kwargs), "tree": DraftTree(tree.parents.to(device), tree.candidates)})()
    for field in ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes"):
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), field
    for kernel, launched in shapes.items():
        assert launched and all(shape[:2] == (block, warps) for shape in launched), (kernel, launched)
        assert device.type != "cuda" or all(shape[2:] == (block, warps) for shape in launched), (kernel, launched)


@pytest.mark.parametrize("form", ["greedy", "draft logits", "target probs, one-hot", "synthetic"])
def test_a_chain_given_as_a_tree_is_the_triton_chain_bit_for_bit(form):
    device = device_for("triton")
    kwargs, _ = _tree_call(form, [-1, 0, 1, 2], _batch(), seed=11)
    kwargs = _on(device, kwargs)
    tree_kwargs = dict(kwargs)
    if form == "synthetic":  # the chain's unconditional rates, the tree's table of conditional ones
        kwargs["acceptance_rates"] = [0.9, 0.72, 0.36, 0.18]
        tree_kwargs["acceptance_rates"] = [[0.9], [0.8], [0.5], [0.5]]
    chain = verify(**kwargs, backend="triton")
    tree = verify(**tree_kwargs, tree=batched([-1, 0, 1, 2], _batch(), device=device), backend="triton")
    for field in ("output_token_ids", "num_emitted", "num_accepted"):
        assert torch.equal(getattr(tree, field), getattr(chain, field)), field
    slots = torch.arange(4, device=device)[None, :]
    assert torch.equal(tree.accepted_nodes, torch.where(slots < chain.num_accepted[:, None], slots, -1).int())


def test_a_tree_of_no_nodes_emits_the_bonus_on_triton():
    device = device_for("triton")
    generator = torch.Generator().manual_seed(9)
    target = torch.randn(6, 1, 5, generator=generator).to(device)
    none = torch.zeros(6, 0, dtype=torch.int64, device=device)
    tree = verify(target, none, seeds=torch.arange(6, device=device), tree=DraftTree(none), backend="triton")
    reference = verify(target.cpu(), none.cpu(), seeds=torch.arange(6), tree=DraftTree(none.cpu()), backend="torch")
    assert torch.equal(tree.output_token_ids.cpu(), reference.output_token_ids)
    assert tree.accepted_nodes.shape == (6, 0) and tree.num_emitted.tolist() == [1] * 6


def test_a_tree_whose_node_count_is_a_power_of_two_fills_its_last_slot():
    # N = 4 nodes in a chain, all accepted (greedy drafts are the argmaxes): the bonus lands in slot N, past the
    # kernel's node lanes
    device = device_for("triton")
    generator = torch.Generator().manual_seed(2)
    logits = torch.randn(3, 5, 7, generator=generator)
    drafts = logits[:, :4].argmax(-1)
    result = verify(logits.to(device), drafts.to(device), mode="greedy", tree=batched([-1, 0, 1, 2], 3, device=device),
                    backend="triton")
    assert result.output_token_ids.cpu().tolist() == logits.argmax(-1).tolist()
    assert result.num_emitted.tolist() == [5] * 3 and result.accepted_nodes.cpu().tolist() == [[0, 1, 2, 3]] * 3


@pytest.mark.parametrize(("form", "shape"), [("draft logits", "three at the root"),
                                           ("without replacement, draft probs", "three at the root"),
                                           ("draft logits", "2x2"), ("target probs, draft logits", "2x2")])
def test_the_split_tree_path_sums_the_first_rejection_across_programs(form, shape, monkeypatch):
    # every request's first child at the root drafts the root row's least likely token (rejected), so its second
    # child is tested against the mass left after the first, which the split path sums across programs (the
    # walk stops for it, the finish kernel sums it and resumes the walk); with three children at the root the third
    # needs the next mass, a pass in the walk's one program. In the 2x2 tree node 1, the second child, has a
    # first child rejected in turn: its mass is summed with the root's, and no mass is a pass in one program.
    launch = triton_launch()
    tree_kernels = importlib.import_module("specbench.kernels.tree")
    device = device_for("triton")
    parents = [-1, -1, -1, 1] if shape == "three at the root" else TREES["2x2"]
    kwargs, tree = _tree_call(form, parents, 16, seed=8, vocab=2100)
    kwargs.update(num_draft_tokens=torch.full((16,), len(parents)), temperatures=torch.full((16,), 0.9))
    # beside them an invalid request (NaN temperature: its walk stops for a mass too, and it emits nothing), a
    # greedy one and one with no nodes
    kwargs["temperatures"][3], kwargs["temperatures"][5], kwargs["num_draft_tokens"][7] = math.nan, 0.0, 0
    target = kwargs.get("target_logits", kwargs.get("target_probs"))
    # the first child's row puts much of its mass on its place's least likely token, and drafts it: rejected,
    # leaving a mass well below 1 that decides the second child's test
    first_children = [(0, 0)] if shape == "three at the root" else [(0, 0), (4, 2)]  # (node, its place's row)
    for node, row in first_children:
        unlikely = target[:, row].argmin(-1)
        kwargs["draft_token_ids"][:, node] = unlikely
        if "draft_logits" in kwargs:
            kwargs["draft_logits"][torch.arange(16), node, unlikely] += 4.0
        else:
            spike = torch.nn.functional.one_hot(unlikely, 2100).float()
            kwargs["draft_probs"][:, node] = 0.5 * kwargs["draft_probs"][:, node] + 0.5 * spike
    if shape == "2x2":
        kwargs["draft_token_ids"][::2, 1] = target[::2, 0].argmax(-1)  # node 1 accepted in about half the batch
    want = verify(**kwargs, tree=tree, backend="torch")
    passes = []
    if interpreted("triton"):  # count the walk's passes over a row in one program
        one_program_pass = tree_kernels._residual_mass
        monkeypatch.setattr(tree_kernels, "_residual_mass", lambda *a: passes.append(1) or one_program_pass(*a))
    with _backend_context("triton-split", monkeypatch):  # the split path, on poisoned scratch
        got = verify(**_on(device, kwargs), tree=DraftTree(tree.parents.to(device), tree.candidates), backend="triton")
    for field in ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes"):
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, field)
    assert int(want.num_emitted[3]) == 0 and int(want.num_emitted[7]) == 1
    assert all(int(counters.abs().sum()) == 0 for counters in launch._arrivals.values())
    second = want.accepted_nodes[:, 0] == 1
    assert 0 < int(second.sum()) < 16  # the second child's test both passes and fails across the batch
    if shape == "2x2":
        assert int((want.accepted_nodes[second, 1] == 5).sum()) > 0  # node 5 tested after its elder was rejected
    if interpreted("triton"):
        assert (len(passes) > 0) == (shape == "three at the root")


RESULT_FIELDS = ("output_token_ids", "num_emitted", "num_accepted", "accepted_nodes")


def _triton_counting_races(kwargs: dict, tree: DraftTree, backend: str, monkeypatch,
                           walks: list | None = None) -> tuple:
    """The tree step on ``backend`` (``triton`` or ``triton-split``) and, under the interpreter, what each race from
    candidates returned (its winner, or -1 where it fell back) and how many residual races took a pass over a row
    (None, None on a GPU); under the interpreter, a 1 appended to ``walks`` for each split-path walk (the rows
    kernel's, one a request, and each walk the finish kernel resumes)."""
    device = device_for("triton")
    tree_kernels = importlib.import_module("specbench.kernels.tree")
    won, races = ([], []) if interpreted("triton") else (None, None)
    with pytest.MonkeyPatch.context() as patch:
        if won is not None:
            candidate_race, full_race = tree_kernels._candidate_race, tree_kernels._residual_race
            patch.setattr(tree_kernels, "_candidate_race", lambda *a: won.append(int(r := candidate_race(*a))) or r)
            patch.setattr(tree_kernels, "_residual_race", lambda *a: races.append(1) or full_race(*a))
            if walks is not None:
                walk = tree_kernels._walk_and_record
                patch.setattr(tree_kernels, "_walk_and_record", lambda *a: walks.append(1) or walk(*a))
        with _backend_context(backend, monkeypatch):
            got = verify(**_on(device, kwargs), tree=DraftTree(tree.parents.to(device), tree.candidates),
                         backend="triton")
    return got, won, races


@pytest.mark.parametrize("form", ["draft logits", "draft probs", "target probs, draft logits"])
def test_the_split_tree_path_resumes_the_walk_where_the_second_child_is_accepted(form, monkeypatch):
    # the root's first child drafts its row's least likely token, given much draft mass (rejected), and the second
    # its likeliest, of little draft mass (accepted): the masses' last program tests the second child from its
    # slices' values and, the child accepted, resumes the walk there, once a request; the tokens are the reference's
    batch, vocab = 6, 2100
    kwargs, tree = _tree_call(form, TREES["2x2"], batch, seed=5, vocab=vocab)
    kwargs.update(num_draft_tokens=torch.full((batch,), 6), temperatures=torch.full((batch,), 0.8))
    tree = DraftTree(torch.tensor([TREES["2x2"]] * batch), tree.candidates)  # every request whole and valid
    target = kwargs.get("target_logits", kwargs.get("target_probs"))
    unlikely = target[:, 0].argmin(-1)
    kwargs["draft_token_ids"][:, 0] = unlikely
    likeliest = target[:, 0].argmax(-1)
    kwargs["draft_token_ids"][:, 1] = likeliest
    rows = torch.arange(batch)
    if "draft_logits" in kwargs:  # node 0's draft all but one-hot on its token; node 1's token unlikely to the draft
        kwargs["draft_logits"][:, 0] = torch.where(torch.arange(vocab) == unlikely[:, None], 40.0, 0.0)
        kwargs["draft_logits"][rows, 1, likeliest] -= 12.0
    else:
        spike = torch.nn.functional.one_hot(unlikely, vocab).float()
        kwargs["draft_probs"][:, 0] = 1e-3 * kwargs["draft_probs"][:, 0] + (1 - 1e-3) * spike
        kwargs["draft_probs"][rows, 1, likeliest] *= 1e-3
        kwargs["draft_probs"][:, 1] /= kwargs["draft_probs"][:, 1].sum(-1, keepdim=True)
    want = verify(**kwargs, tree=tree, backend="torch")
    assert bool((want.accepted_nodes[:, 0] == 1).all())  # every request's second child accepted
    walks = []
    got, won, _races = _triton_counting_races(kwargs, tree, "triton-split", monkeypatch, walks)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, field)
    if won is not None:  # under the interpreter: the rows kernel's walk, then one resumed walk, a request
        assert len(walks) == 2 * batch, len(walks)


def _race_exponentials(kwargs: dict, vocab: int) -> torch.Tensor:
    """``[B, V]``: each request's E_y of the residual race at its root (position ``positions[b]``)."""
    rng = importlib.import_module("specbench.rng")
    return -torch.log(rng.uniform(kwargs["seeds"][:, None], kwargs["positions"][:, None], rng.RESIDUAL,
                                  torch.arange(vocab)[None, :]))


@pytest.mark.parametrize(("form", "depth", "backend"), [
    *((form, 0, backend) for backend in ("triton", "triton-split")
      for form in ("draft logits", "target probs, draft logits", "without replacement, draft probs")),
    ("draft logits", 1, "triton"), ("draft probs", 1, "triton"), ("draft logits", 1, "triton-split"),
    ("draft probs", 1, "triton-split")])
def test_the_race_after_two_rejected_children_runs_from_candidates(form, depth, backend, monkeypatch):
    # both children of the root (depth 0), or of node 0 after the root's first child is accepted (depth 1: its
    # children are nodes 2 and 3, so the first sibling is not lane 1's default node), are rejected (each drafts its
    # row's least likely token, given much draft mass): the pass summing the mass left after the first keeps each
    # lane's candidate, and the race after the second runs over them alone (kernels/tree.py, CANDIDATE_MARGIN) where
    # its winner clears every dropped token; where it cannot (the margin made huge here), the race takes its pass
    # over the row. The tokens are the reference's either way. On the split path, where the second child is
    # rejected and the winner stands, the masses' last program writes the tokens without resuming the walk (drawn
    # with replacement); a second child accepted, a race that falls back, or drawn without replacement, it resumes.
    launch = triton_launch()
    tree_kernels = importlib.import_module("specbench.kernels.tree")
    batch, vocab = 12, 2100
    kwargs, tree = _tree_call(form, TREES["2x2"], batch, seed=4, vocab=vocab)
    kwargs.update(num_draft_tokens=torch.full((batch,), 6), temperatures=torch.full((batch,), 0.8))
    kwargs["temperatures"][5] = 0.0  # a greedy request beside them
    target = kwargs.get("target_logits", kwargs.get("target_probs"))
    if depth:  # the root's row all but certain of node 0's token: node 0 accepted whatever its draft law
        target[:, 1] = torch.where(target[:, 1] == float("-inf"), 0.0, target[:, 1])  # node 0's row valid
        kwargs["draft_token_ids"][:, 0] = target[:, 0].argmax(-1)
        target[torch.arange(batch), 0, kwargs["draft_token_ids"][:, 0]] += 60.0
    unlikely = target[:, depth].argsort(-1)[:, :2]  # the place's row's two least likely tokens
    children = (0, 1) if depth == 0 else (2, 3)
    kwargs["draft_token_ids"][:, list(children)] = unlikely
    for i, node in enumerate(children):
        if "draft_logits" in kwargs:
            kwargs["draft_logits"][torch.arange(batch), node, unlikely[:, i]] += 12.0
        elif "draft_probs" in kwargs:
            spike = torch.nn.functional.one_hot(unlikely[:, i], vocab).float()
            kwargs["draft_probs"][:, node] = 0.5 * kwargs["draft_probs"][:, node] + 0.5 * spike
    want = verify(**kwargs, tree=tree, backend="torch")
    # the place's children rejected (the greedy one aside), after node 0 at depth 1
    assert int((want.num_accepted == depth).sum()) >= batch - 2
    assert not depth or bool((want.accepted_nodes[want.num_accepted == 1, 0] == 0).all())
    settings = [(tree_kernels.CANDIDATE_MARGIN, 1, True)]
    if interpreted("triton"):  # and where the tokens do not depend on them: the fallback, the split path keeping none
        settings.append((1e30, 1, False))
        if backend == "triton-split" and form == "draft logits":  # (launch.TREE_CANDIDATES_MIN_BATCH)
            settings.append((tree_kernels.CANDIDATE_MARGIN, batch + 1, None))
    for margin, min_batch, taken in settings:
        monkeypatch.setattr(tree_kernels, "CANDIDATE_MARGIN", margin)
        monkeypatch.setattr(launch, "TREE_CANDIDATES_MIN_BATCH", min_batch)
        walks = []
        got, won, races = _triton_counting_races(kwargs, tree, backend, monkeypatch, walks)
        for field in RESULT_FIELDS:
            assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, field, margin)
        if won is None:
            continue
        stopped = int((want.num_accepted == depth).sum()) - 1  # the greedy request takes no race
        if backend == "triton-split":  # resumed walks: every stop for a mass but the races from candidates that stood
            second = (want.num_accepted > depth) & (want.accepted_nodes[:, depth] == children[1])
            resumed = int(second.sum()) + (stopped if not taken or form.startswith("without") else 0)
            if taken and not form.startswith("without"):
                resumed += sum(token < 0 for token in won)
            assert len(walks) - batch == resumed, (form, margin, len(walks), resumed)
        assert len(won) == (0 if taken is None else stopped), (form, len(won))
        if taken and depth == 0:  # every race from candidates, none over the row
            assert all(token >= 0 for token in won) and not races, (won, len(races))
        elif taken:  # (these rows were not chosen so that every winner clears its bound: most do, and only a race
            # that fell back takes a pass over the row)
            fell_back = sum(token < 0 for token in won)
            assert 2 * fell_back < len(won) and (len(races) > 0) == (fell_back > 0), (won, len(races))
        else:
            assert all(token < 0 for token in won) and len(races) >= stopped


@pytest.mark.parametrize(("name", "batch", "slices", "candidates"), [
    ("triton-tree-finish1", 6, 1, True), ("triton-tree-finish2-nocand", 6, 2, False),
    ("triton-tree-cand", 1, None, True), ("triton-tree-finish2-cand", 1, 2, True), ("triton-tree-finish2", 1, 2, None)])
def test_a_tree_finish_variant_sets_its_slices_and_candidates_and_keeps_the_tokens(name, batch, slices, candidates,
                                                                                    monkeypatch):
    # `--impl triton-tree-finishN[-cand|-nocand]`: the split path forced, its finish kernel at most N slices of a row a
    # request (several chunks a program where fewer slices than the launcher's), the race after two rejected children
    # from the masses' candidates or by its own pass at any batch. Both children of the root are rejected in every
    # request (each drafts its row's least likely token, given much draft mass): the tokens are the reference's.
    from specbench.implementations import resolve

    launch = triton_launch()
    device = device_for("triton")
    vocab = 2100
    kwargs, tree = _tree_call("draft logits", TREES["2x2"], batch, seed=6, vocab=vocab)
    kwargs.update(num_draft_tokens=torch.full((batch,), 6), temperatures=torch.full((batch,), 0.8))
    unlikely = kwargs["target_logits"][:, 0].argsort(-1)[:, :2]
    kwargs["draft_token_ids"][:, [0, 1]] = unlikely
    for node in (0, 1):
        kwargs["draft_logits"][torch.arange(batch), node, unlikely[:, node]] += 12.0
    want = verify(**kwargs, tree=tree, backend="torch")
    assert bool((want.num_accepted == 0).all())
    launched = []
    finish = launch._TREE_FINISH

    def finish_counted(grid, args, num_warps, stream, **constexprs):
        launched.append((grid[0] // (2 * batch), constexprs["CANDIDATES"]))
        finish(grid, args, num_warps, stream, **constexprs)

    monkeypatch.setattr(launch, "_TREE_FINISH", finish_counted)
    variant = resolve(name)
    assert variant.trees
    with _backend_context("triton", monkeypatch):  # poisoned scratch
        got = variant.bind({**_on(device, kwargs), "tree": DraftTree(tree.parents.to(device), tree.candidates)})()
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (name, field)
    assert all(int(counters.abs().sum()) == 0 for counters in launch._arrivals.values())
    with launch.strategy("split"):
        _block, _warps = launch._launch_shape(vocab, device, True, "probabilistic", batch)
        own = launch._slices(batch, vocab, _block, device)[0]
    cap = launch.TREE_FINISH_MAX_SLICES if slices is None else slices
    if candidates is None:  # the launcher's
        candidates = batch >= launch.TREE_CANDIDATES_MIN_BATCH
    assert launched == [(min(cap, own), candidates)], (launched, own)
    assert launch.TUNING["tree_finish_slices"] is None and launch.TUNING["tree_race_candidates"] is None


def _counted(function, calls: list):
    # `function`, appending to `calls` each time it runs (the interpreter calls a kernel's helpers as Python)
    return lambda *args: calls.append(1) or function(*args)


@pytest.mark.parametrize("backend", ["triton", "triton-split"])
@pytest.mark.parametrize("form", ["one-hot", "invalid draft-logit rows", "without replacement, one-hot"])
def test_a_rejected_one_hot_child_leaves_a_mass_without_a_pass(form, backend, monkeypatch):
    # three children at the root, each drafting one of its row's least likely tokens (rejected): after a one-hot
    # draft the next sibling's mass is R - r(x) (the contract), so no pass sums a mass (one program's walk, the
    # split path's masses part, the pass keeping candidates), the walk never stops for one, and the race after
    # the last child takes its pass over the row. A draft-logit row with no finite value is one-hot too; drawn
    # without replacement the third child repeats the first's token (its draft law is then empty). The tokens
    # are the reference's.
    tree_kernels = importlib.import_module("specbench.kernels.tree")
    batch, vocab, parents = 12, 2100, [-1, -1, -1, 0]
    kwargs, tree = _tree_call("draft logits" if form == "invalid draft-logit rows" else "one-hot", parents, batch,
                              seed=11, vocab=vocab)
    if form.startswith("without replacement"):
        tree = DraftTree(tree.parents, "without_replacement")
    kwargs.update(num_draft_tokens=torch.full((batch,), 4), temperatures=torch.full((batch,), 0.8))
    kwargs["temperatures"][5] = 0.0  # a greedy request beside them
    target = kwargs["target_logits"]
    unlikely = target[:, 0].argsort(-1)[:, :3]
    kwargs["draft_token_ids"][:, :3] = unlikely
    if form.startswith("without replacement"):
        kwargs["draft_token_ids"][:, 2] = unlikely[:, 0]
    if "draft_logits" in kwargs:
        kwargs["draft_logits"][:, :3] = float("-inf")  # no finite value: each root child's draft is one-hot
    want = verify(**kwargs, tree=tree, backend="torch")
    assert int((want.num_accepted == 0).sum()) >= batch - 1  # every sampled request rejects the three
    sums = []
    with pytest.MonkeyPatch.context() as patch:
        if interpreted("triton"):
            for name in ("_residual_mass", "_slice_mass", "_mass_and_candidates"):
                patch.setattr(tree_kernels, name, _counted(getattr(tree_kernels, name), sums))
        got, _won, races = _triton_counting_races(kwargs, tree, backend, monkeypatch)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), (form, field)
    if races is not None:
        assert not sums and len(races) >= batch - 1, (len(sums), len(races))


@pytest.mark.parametrize("backend", ["triton", "triton-split"])
@pytest.mark.parametrize(("form", "drafts", "law"), [
    ("one-hot", [0, 1, 2], [0.5, 0.25, 0.125]),
    ("one-hot", [0, 0, 1], [0.5, 0.0, 0.25]),  # a repeat: r(x) is 0 there, R stays
    ("without replacement, one-hot", [0, 0, 1], [0.5, 0.0, 0.25]),
    ("invalid draft-logit rows", [0, 1, 2], [0.5, 0.25, 0.125])])
def test_one_hot_children_are_accepted_with_their_target_probabilities(form, drafts, law, backend, monkeypatch):
    # three one-hot children at the root, p = (1/2, 1/4, 1/8, and 1/8 spread over the rest): the k-th distinct
    # token is accepted with probability p(x_k) exactly when each rejection leaves R - r(x) (a mass left at R
    # would give 1/8 and 1/32 to the later ones; subtracting p(x) for a repeat, whose r(x) is 0, 1/2 to token 1).
    # The reference's shares over 512 requests follow the law; the kernel is the reference to the bit on the
    # first 64 (either mistake above changes about one request in eight; the interpreter's time)
    batch, vocab, on_kernel = 512, 16, 64
    p = torch.tensor([0.5, 0.25, 0.125] + [0.125 / 13] * 13)
    logits = p.log()[None, None].expand(batch, 4, vocab).contiguous()
    kwargs = {"target_logits": logits, "draft_token_ids": torch.tensor([drafts] * batch),
              "seeds": torch.arange(batch), "temperatures": torch.ones(batch)}
    if form == "invalid draft-logit rows":
        kwargs["draft_logits"] = torch.full((batch, 3, vocab), float("-inf"))
    tree = batched([-1, -1, -1], batch, candidates="without_replacement" if form.startswith("without") else
                   "independent")
    want = verify(**kwargs, tree=tree, backend="torch")
    shares = [float((want.accepted_nodes[:, 0] == node).float().mean()) for node in range(3)]
    for share, expected in zip(shares, law, strict=True):  # (binomial, 512 draws: 4.5 standard deviations)
        assert abs(share - expected) <= 4.5 * (expected * (1 - expected) / batch) ** 0.5 + 1e-9, (shares, law)
    first = {key: value[:on_kernel] for key, value in kwargs.items()}
    got, _won, _races = _triton_counting_races(first, DraftTree(tree.parents[:on_kernel], tree.candidates), backend,
                                               monkeypatch)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)[:on_kernel]), field


@pytest.mark.parametrize("backend", ["triton", "triton-split"])
def test_the_mass_after_a_one_hot_child_is_the_references_on_rows_not_summing_to_one(backend, monkeypatch):
    # target probabilities as given, (0.2, 0.2, 0.1) at the root, one-hot children 0 and 1: after child 0 fails
    # the contract's mass is 1 - 0.2, not the row's 0.3, which decides child 1 for a third of the draws
    batch = 256
    probs = torch.tensor([[.2, .2, .1], [0, 0, 1], [0, 0, 1]])[None].expand(batch, -1, -1).contiguous()
    kwargs = {"target_probs": probs, "draft_token_ids": torch.tensor([[0, 1]] * batch),
              "seeds": torch.arange(batch), "temperatures": torch.ones(batch)}
    tree = batched([-1, -1], batch)
    want = verify(**kwargs, tree=tree, backend="torch")
    assert 0.15 < float((want.accepted_nodes[:, 0] == 1).float().mean()) < 0.25  # 0.8 x 0.25 = 0.2
    got, _won, _races = _triton_counting_races(kwargs, tree, backend, monkeypatch)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), field


@pytest.mark.parametrize(("backend", "covered"), [("triton", 200), ("triton-split", 3)])
def test_a_race_won_by_a_token_the_candidates_dropped_takes_its_pass(backend, covered, monkeypatch):
    # The second child's draft law covers the residual after the first (R q1 >= r1) on the `covered` tokens of
    # largest r1 / E, so the race after both children is won by the next token, which a lane or a group of lanes
    # often dropped beside a covered one: the winner among the candidates left then does not clear the dropped
    # tokens' bound, and the race takes its pass over the row. The tokens are the reference's.
    triton_launch()
    batch, vocab = 6, 8192
    kwargs, tree = _tree_call("draft probs", TREES["2x2"], batch, seed=6, vocab=vocab)
    kwargs.update(num_draft_tokens=torch.full((batch,), 6), temperatures=torch.full((batch,), 0.8))
    target = kwargs["target_logits"]
    unlikely = target[:, 0].argsort(-1)[:, :2]
    kwargs["draft_token_ids"][:, :2] = unlikely
    q0 = 0.5 * kwargs["draft_probs"][:, 0] + 0.5 * torch.nn.functional.one_hot(unlikely[:, 0], vocab).float()
    kwargs["draft_probs"][:, 0] = q0
    residual = (torch.softmax(target[:, 0] / 0.8, -1) - q0).clamp_min(0)  # r1
    top = (residual / _race_exponentials(kwargs, vocab)).topk(covered, -1).indices
    q1 = torch.zeros(batch, vocab).scatter_(1, top, residual.gather(1, top))
    kwargs["draft_probs"][:, 1] = q1 / q1.sum(1, keepdim=True)
    want = verify(**kwargs, tree=tree, backend="torch")
    assert int((want.num_accepted == 0).sum()) == batch
    got, won, _races = _triton_counting_races(kwargs, tree, backend, monkeypatch)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), field
    if won is not None:
        assert len(won) == batch and any(token < 0 for token in won), won


@pytest.mark.parametrize(("backend", "layout"), [("triton", "one group"), ("triton", "one lane"),
                                                 ("triton", "one group of lanes"), ("triton-split", "one lane")])
def test_a_race_won_by_the_token_beside_a_covered_one_takes_its_pass(backend, layout, monkeypatch):
    # Two tokens A and B of one large, equal target probability, where A has the smaller race exponential E (it
    # leads r1 / E); the second child's draft law is the one-hot at A, so R q1 covers A and B wins the race after
    # both children. B sits beside A: in A's group of 8 tokens (one program), in A's lane a chunk later, or in the
    # next lane of A's group of lanes (one program, 4 groups of lanes). B is then no candidate, only in the bound of
    # the dropped tokens, and the race must take its pass over the row to find it.
    launch = triton_launch()
    if layout == "one group of lanes":
        monkeypatch.setattr(launch, "TREE_CANDIDATE_GROUPS", 4)
    batch, vocab = 8, 4096  # lanes of 1024 tokens under the interpreter; the split path in slices of 2048
    kwargs, tree = _tree_call("draft probs", TREES["2x2"], batch, seed=3, vocab=vocab)
    kwargs.update(num_draft_tokens=torch.full((batch,), 6), temperatures=torch.full((batch,), 0.8))
    target = kwargs["target_logits"]
    exponentials = _race_exponentials(kwargs, vocab)
    unlikely = torch.full((batch,), vocab - 1)
    step = {"one group": 1, "one lane": 1024, "one group of lanes": 8}[layout]
    target[:, 0] = -30.0  # every other token far behind: B wins the race
    others = []
    for b in range(batch):
        a = 101 + 8 * b
        lead, other = (a, a + step) if exponentials[b, a] < exponentials[b, a + step] else (a + step, a)
        target[b, 0, lead] = target[b, 0, other] = 10.0
        kwargs["draft_probs"][b, 1] = torch.nn.functional.one_hot(torch.tensor(lead), vocab).float()
        others.append(other)
    kwargs["draft_token_ids"][:, :2] = unlikely[:, None]  # both children rejected: q0 one-hot there, q1(x) = 0
    kwargs["draft_probs"][:, 0] = torch.nn.functional.one_hot(unlikely, vocab).float()
    want = verify(**kwargs, tree=tree, backend="torch")
    assert (want.num_accepted == 0).all() and want.output_token_ids[:, 0].tolist() == others
    got, won, _races = _triton_counting_races(kwargs, tree, backend, monkeypatch)
    for field in RESULT_FIELDS:
        assert torch.equal(getattr(got, field).cpu(), getattr(want, field)), field
    if won is not None:
        assert len(won) == batch and all(token < 0 for token in won), won
