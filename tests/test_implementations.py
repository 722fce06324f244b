"""The plugin contract: loading by name, file, module and entry point; declared facts; conversions."""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap

import pytest
import torch
from conftest import same_result

from specbench import oracle
from specbench.errors import SpecbenchError
from specbench.implementations import contract, registry, resolve, resolve_all, sampler
from specbench.verification import VerifyResult, verify

PLUGIN = textwrap.dedent('''
    from specbench import verify
    from specbench.implementations import sampler

    @sampler(name="copy-of-torch", modes=["greedy", "probabilistic"], target="logits", draft="logits",
             rng="specbench", one_hot=True)
    def declared(**inputs):
        return verify(backend="torch", **inputs)

    def plain(**inputs):
        return None

    count = 3
    names = ["torch"]
''')


@pytest.fixture
def plugin_file(tmp_path):
    path = tmp_path / "my_plugin.py"
    path.write_text(PLUGIN)
    return path


def test_a_file_plugin_loads_and_matches_the_reference(plugin_file):
    impl = resolve(f"{plugin_file}:declared")
    assert (impl.name, impl.modes, impl.rng) == ("copy-of-torch", ("greedy", "probabilistic"), "specbench")
    assert impl.source.endswith(":declared")
    target, drafts = torch.randn(4, 3, 20), torch.randint(0, 20, (4, 2))
    kwargs = {"mode": "probabilistic", "target_logits": target, "draft_token_ids": drafts,
              "draft_logits": torch.randn(4, 2, 20), "seeds": torch.arange(4)}
    got, want = impl.bind(kwargs)(), verify(**kwargs, backend="torch")
    assert same_result(got, want)


def test_a_module_plugin_and_an_installed_entry_point_load(plugin_file, monkeypatch):
    monkeypatch.syspath_prepend(str(plugin_file.parent))
    assert resolve("my_plugin:declared").name == "copy-of-torch"
    point = importlib.metadata.EntryPoint("mine", "my_plugin:declared", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"mine": point})
    assert resolve("mine").name == "copy-of-torch"
    assert "mine" in registry.known_names()
    broken = importlib.metadata.EntryPoint("broken", "no_such_module_here:x", registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "_entry_points", lambda: {"broken": broken})
    with pytest.raises(SpecbenchError, match="the installed plugin 'broken' .* failed to import: ModuleNotFound"):
        resolve("broken")
    sys.modules.pop("my_plugin", None)


@pytest.mark.parametrize(("spec", "message"), [
    ("tensorrt-llm", "unknown implementation 'tensorrt-llm'; choose from torch, triton, .* or give package.module:function"),
    ("{file}:plain", "is a plain function: declare what it takes and supports with @specbench"),
    ("{file}:nothing", "has no attribute 'nothing'"),
    ("{dir}/missing.py:f", "no such plugin file: .*missing.py"),
    ("no_such_package_x.mod:f", "cannot import 'no_such_package_x.mod'"),
    # the article fits the type's name
    ("{file}:count", "count is an int, not an implementation declared with @specbench"),
    ("{file}:names", "names is a list, not an implementation declared with @specbench"),
    # a plugin file without its function: the form, not a list of names
    ("{file}", "is a path, not an implementation: give a plugin file as FILE.py:FUNCTION"),
    ("plugins/mine", "'plugins/mine' is a path, not an implementation: give a plugin file as FILE.py:FUNCTION"),
])
def test_a_bad_impl_is_one_sentence(plugin_file, spec, message):
    with pytest.raises(SpecbenchError, match=message):
        resolve(spec.format(file=plugin_file, dir=plugin_file.parent))


def test_a_plugin_that_fails_to_import_names_the_error(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("raise RuntimeError('needs a GPU driver')\n")
    with pytest.raises(SpecbenchError, match="loading .*broken.py failed: RuntimeError: needs a GPU driver"):
        resolve(f"{path}:f")


def test_two_implementations_with_one_name_are_refused(plugin_file):
    with pytest.raises(SpecbenchError, match="two implementations are called 'copy-of-torch'"):
        resolve_all([f"{plugin_file}:declared", f"{plugin_file.parent}/./my_plugin.py:declared"])


@pytest.mark.parametrize(("facts", "message"), [
    ({"modes": ["beam"]}, "modes must be some of greedy, probabilistic, synthetic, got \\['beam'\\]"),
    ({"target": "logprobs"}, "target must be one of logits, probs, got 'logprobs'"),
    ({"rng": "curand"}, "rng must be one of specbench, own, got 'curand'"),
    ({"devices": []}, "devices must be some of cpu, cuda, got \\[\\]"),
])
def test_a_bad_declaration_is_refused(facts, message):
    with pytest.raises(SpecbenchError, match=message):
        sampler(**facts)


def test_logits_become_the_probabilities_the_contract_reads():
    logits = torch.randn(3, 2, 12) * 3
    logits[0, 0, :] = float("-inf")  # an invalid row
    logits[1, 1, 4] = float("nan")
    temperatures = torch.tensor([0.7, 0.0, 1.3])
    probs = contract.logits_to_probs(logits, temperatures)
    assert torch.equal(probs[0, 0], torch.zeros(12))
    assert torch.allclose(probs[0, 1].double(), oracle.softmax(logits[0, 1], 0.7), atol=1e-6)
    assert torch.allclose(probs[2, 0].double(), oracle.softmax(logits[2, 0], 1.3), atol=1e-6)
    for row in range(2):  # a greedy request: the one-hot at the argmax
        assert probs[1, row].sum() == 1 and int(probs[1, row].argmax()) == oracle.greedy_token(logits[1, row])


def test_each_form_is_converted_and_conversions_are_listed():
    seen = {}

    @sampler(target="probs", draft="logits")
    def spy(**inputs):
        seen.update(inputs)
        return verify(backend="torch", **{k: v for k, v in inputs.items() if k != "target_probs"},
                      target_probs=inputs["target_probs"])

    target, drafts = torch.randn(2, 3, 8), torch.randint(0, 8, (2, 2))
    draft_probs = torch.softmax(torch.randn(2, 2, 8), -1)
    kwargs = {"mode": "probabilistic", "target_logits": target, "draft_token_ids": drafts,
              "draft_probs": draft_probs, "seeds": torch.arange(2), "temperatures": torch.tensor([0.5, 2.0])}
    assert spy.conversions(kwargs) == ["target logits -> probs", "draft probs -> logits"]
    spy.bind(kwargs)()
    assert set(seen) >= {"target_probs", "draft_logits"} and "target_logits" not in seen
    # the draft logits it gets give back q at the request's temperature
    recovered = torch.softmax(seen["draft_logits"] / torch.tensor([0.5, 2.0])[:, None, None], -1)
    assert torch.allclose(recovered, draft_probs, atol=1e-6)
    one_hot = {k: v for k, v in kwargs.items() if k != "draft_probs"}
    assert spy.conversions(one_hot) == ["target logits -> probs", "draft one-hot -> logits"]


@pytest.mark.parametrize("target_form", contract.FORMS)
@pytest.mark.parametrize("draft_form", contract.FORMS)
def test_every_declared_form_gets_the_same_step_from_target_probabilities(target_form, draft_form):
    # with target probabilities and draft logits at T != 1, a plugin taking logits gets T * log p (divided by T:
    # log p) and one taking probabilities gets softmax(draft logits / T): the same step as given, in any form
    @sampler(target=target_form, draft=draft_form, rng="specbench")
    def through_torch(**inputs):
        return verify(backend="torch", **inputs)

    generator = torch.Generator().manual_seed(4)
    batch, vocab = 12, 20
    temperatures = torch.tensor([0.4, 0.0, 2.5, 1.0] * 3)
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    target_probs = torch.softmax(torch.randn(batch, 3, vocab, generator=generator) * 2 / scale, -1)
    draft_logits = torch.randn(batch, 2, vocab, generator=generator) * 2
    drafts = torch.randint(0, vocab, (batch, 2), generator=generator)
    kwargs = {"mode": "probabilistic", "target_probs": target_probs, "draft_logits": draft_logits,
              "draft_token_ids": drafts, "seeds": torch.arange(batch), "temperatures": temperatures}
    got, want = through_torch.bind(kwargs)(), verify(backend="torch", **kwargs)
    assert same_result(got, want)


def test_conversion_inside_the_call_gives_the_same_outputs():
    impl = resolve("textbook")
    kwargs = {"mode": "probabilistic", "target_logits": torch.randn(5, 4, 30), "draft_logits": torch.randn(5, 3, 30),
              "draft_token_ids": torch.randint(0, 30, (5, 3)), "seeds": torch.arange(5)}
    outside, inside = impl.bind(kwargs, "outside")(), impl.bind(kwargs, "inside")()
    assert same_result(outside, inside)
    with pytest.raises(SpecbenchError, match="conversion must be one of outside, inside, got 'later'"):
        impl.bind(kwargs, "later")


def test_missing_peers_are_a_one_line_note(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("flashinfer", "vllm") else real(name, *a))
    assert resolve("flashinfer").unavailable(torch.device("cuda")) == \
        "FlashInfer is not installed (pip install flashinfer-python)"
    assert resolve("vllm").unavailable(torch.device("cuda")) == "vLLM is not installed (pip install vllm)"
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    assert resolve("sglang").unavailable(torch.device("cuda")) == "SGLang is not installed (pip install sglang)"


# a stand-in for SGLang 0.5.23's kernel file, with its verifier's signature: it checks what the adapter hands it
# (shapes, dtypes, the chain's slots) and accepts every draft, then writes 7 as the final token
_SGLANG_STAND_IN = """
import torch

def chain_speculative_sampling_triton(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                      retrive_next_token, retrive_next_sibling, uniform_samples,
                                      uniform_samples_for_final_sampling, target_probs, draft_probs, threshold_single,
                                      threshold_acc, deterministic, *, block_verification=False):
    batch, slots = candidates.shape
    assert predicts.shape == (batch * slots,) and predicts.dtype == torch.int32 and bool((predicts == -1).all())
    assert accept_index.shape == (batch, slots) and accept_token_num.shape == (batch,)
    assert retrive_index.tolist() == [[b * slots + s for s in range(slots)] for b in range(batch)]
    assert retrive_next_token[0].tolist() == list(range(1, slots)) + [-1]
    assert uniform_samples.shape == (batch, slots) and uniform_samples_for_final_sampling.shape == (batch,)
    assert target_probs.shape[:2] == (batch, slots) and draft_probs.shape[:2] == (batch, slots - 1)
    flat = retrive_index.reshape(-1)
    for b in range(batch):
        for s in range(1, slots):
            predicts[flat[b * slots + s - 1]] = candidates[b, s]
        predicts[flat[b * slots + slots - 1]] = 7 if not block_verification else 8
    accept_token_num.fill_(slots - 1)
"""


def test_the_sglang_adapter_loads_the_kernel_file_alone_and_maps_its_layout(tmp_path, monkeypatch):
    kernel_dir = tmp_path / "sglang" / "kernels" / "ops" / "speculative"
    kernel_dir.mkdir(parents=True)
    (tmp_path / "sglang" / "__init__.py").write_text("raise ImportError('the server stack: never imported')\n")
    (kernel_dir / "reject_sampling.py").write_text(_SGLANG_STAND_IN)
    monkeypatch.syspath_prepend(str(tmp_path))
    from specbench.implementations import adapters

    adapters._sglang_verifier.cache_clear()
    monkeypatch.setattr(adapters, "_sglang_verifier", adapters._sglang_verifier.__wrapped__)
    drafts = torch.tensor([[3, 1, 4], [1, 5, 9]])
    probs = torch.full((2, 4, 10), 0.1)
    kwargs = {"target_probs": probs, "draft_probs": probs[:, :3], "draft_token_ids": drafts,
              "seeds": torch.tensor([1, 2]), "positions": torch.tensor([0, 5])}
    token = adapters.sglang.fn(**kwargs)
    block = adapters.sglang.fn(**kwargs, method="block")
    assert token.output_token_ids.tolist() == [[3, 1, 4, 7], [1, 5, 9, 7]]
    assert block.output_token_ids.tolist() == [[3, 1, 4, 8], [1, 5, 9, 8]]
    assert token.num_accepted.tolist() == [3, 3] and token.num_emitted.tolist() == [4, 4]


# a stand-in for SGLang 0.5.23's spec_tree.py: imports of its server the adapter must never run, and a greedy tree
# walker written here to the signature of SGLang's verify_tree_greedy_kernel_triton (one program a request: from
# the root, the first child in list order whose token is the target's argmax at the current node's row, until
# none is; each accepted node's row index written after the root's, then the argmax at the last one)
_SGLANG_TREE_STAND_IN = """
from sglang.srt.platforms import current_platform

import triton
import triton.language as tl

raise ImportError("the module's body: never run by the adapter")


@triton.jit
def verify_tree_greedy_kernel_triton(predicts_ptr, accept_index_ptr, accept_token_num_ptr, candidates_ptr,
                                     retrieve_index_ptr, retrieve_next_token_ptr, retrieve_next_sibling_ptr,
                                     target_predict_ptr, batch_size: tl.constexpr,
                                     num_speculative_tokens: tl.constexpr, num_draft_tokens: tl.constexpr):
    b = tl.program_id(0)
    base = b * num_draft_tokens
    row = tl.load(retrieve_index_ptr + base)
    tl.store(accept_index_ptr + b * num_speculative_tokens, row.to(tl.int32))
    node = row * 0
    count = node.to(tl.int32)
    walking = node + 1
    for _depth in range(1, num_speculative_tokens):
        if walking != 0:
            want = tl.load(target_predict_ptr + row)
            child = tl.load(retrieve_next_token_ptr + base + node)
            found = node * 0 - 1
            for _sibling in range(num_draft_tokens):
                if (found == -1) & (child != -1):
                    if tl.load(candidates_ptr + base + child) == want:
                        found = child
                    else:
                        child = tl.load(retrieve_next_sibling_ptr + base + child)
            if found == -1:
                walking = walking * 0
            else:
                tl.store(predicts_ptr + row, want.to(tl.int32))
                row = tl.load(retrieve_index_ptr + base + found)
                count += 1
                tl.store(accept_index_ptr + b * num_speculative_tokens + count, row.to(tl.int32))
                node = found
    tl.store(accept_token_num_ptr + b, count)
    tl.store(predicts_ptr + row, tl.load(target_predict_ptr + row).to(tl.int32))
"""


def _sglang_tree_file(tmp_path, monkeypatch, content: str, init: str = ""):
    """SGLang's package as the adapter finds it: ``sglang/kernels/ops/speculative/spec_tree.py`` holding
    ``content``, ``sglang/__init__.py`` holding ``init``; the walker loaded afresh from it."""
    from specbench.implementations import adapters

    kernel_dir = tmp_path / "sglang" / "kernels" / "ops" / "speculative"
    kernel_dir.mkdir(parents=True, exist_ok=True)
    (tmp_path / "sglang" / "__init__.py").write_text(init)
    (kernel_dir / "spec_tree.py").write_text(content)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(adapters, "_sglang_tree_walker", adapters._sglang_tree_walker.__wrapped__)
    return kernel_dir / "spec_tree.py"


def test_the_sglang_tree_adapter_compiles_the_walker_alone_and_maps_the_layouts(tmp_path, monkeypatch):
    """sglang-tree: the walker compiled from its file without the module's imports, SGLang's lists built from
    this layout (ragged trees, absent nodes, siblings repeating a token, a parent after its node, one below -1),
    and the walk read back: the torch reference's greedy tokens, counts and accepted nodes, for a tree and for a
    chain, including requests that accept the tree's deepest path to its end; a row holding a NaN takes the raw
    argmax (SGLang's), where the reference reads a NaN as -inf."""
    from conftest import device_for

    from specbench.trees import DraftTree

    _sglang_tree_file(tmp_path, monkeypatch, _SGLANG_TREE_STAND_IN, "raise ImportError('the server stack')\n")
    device = device_for("triton")
    generator = torch.Generator().manual_seed(11)
    batch, vocab = 48, 3  # (three tokens: many drafts match the argmax, so paths run deep)
    parents = torch.tensor([-1, -1, -1, 0, 0, 1, 3, 3, 6, 8, 9])  # the deepest path: nodes 0, 3, 6, 8, 9, 10
    num_nodes = len(parents)
    parents = parents.expand(batch, num_nodes).clone()
    parents[0, 4] = 7  # (a parent after its node: no parent reaches node 4 of request 0)
    parents[1, 5] = -5  # (nor node 5 of request 1)
    target = torch.randn(batch, num_nodes + 1, vocab, generator=generator)
    drafts = torch.randint(0, vocab, parents.shape, generator=generator)
    drafts[torch.rand(parents.shape, generator=generator) < 0.1] = -1  # absent nodes
    counts = torch.randint(0, num_nodes + 1, (batch,), generator=generator).to(torch.int32)
    deepest = [0, 3, 6, 8, 9, 10]
    rows_before = [0, 1, 4, 7, 9, 10]  # the row each of those nodes is tested against (its parent's)
    for b in (2, 3):  # every node of the deepest path the argmax of its parent's row, the whole tree counted
        drafts[b, deepest] = target[b, rows_before].argmax(dim=-1)
        counts[b] = num_nodes
    target[4, 0, 1] = float("nan")  # the root's row: SGLang's argmax is the NaN's id
    base = {"target_logits": target.to(device), "draft_token_ids": drafts.to(device), "mode": "greedy",
            "temperatures": torch.zeros(batch, device=device), "num_draft_tokens": counts.to(device)}
    impl = resolve("sglang-tree")
    for kwargs in ({**base, "tree": DraftTree(parents.to(device)), "check_values": False}, base):
        want, got = verify(**kwargs, backend="torch"), impl.prepare(dict(kwargs))()
        others = torch.arange(batch, device=device) != 4
        assert same_result(VerifyResult(*(value[others] if value is not None else None for value in got)),
                           VerifyResult(*(value[others] if value is not None else None for value in want)))
        assert got.output_token_ids[4, 0].item() == 1 != want.output_token_ids[4, 0].item()
        assert (got.accepted_nodes is None) == ("tree" not in kwargs)
        if "tree" in kwargs:
            assert got.num_accepted[2:4].tolist() == [len(deepest)] * 2
            assert got.accepted_nodes[2].tolist()[:len(deepest)] == deepest
    with pytest.raises(SpecbenchError, match="SGLang's tree walkers verify greedily only"):
        impl.prepare({**base, "mode": "probabilistic", "temperatures": torch.ones(batch, device=device),
                      "seeds": torch.arange(batch, device=device)})
    assert impl.trees and impl.modes == ("greedy",)


def _walk_like_sglangs_cuda(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
                            retrive_next_sibling, target_predict):
    """A stand-in written here to the contract of SGLang's CUDA ``verify_tree_greedy`` (tree.cuh): its dtypes and
    shapes checked as its host function checks them, then the greedy walk over its lists, in Python."""
    batch, width = candidates.shape
    for tensor in (candidates, retrive_index, retrive_next_token, retrive_next_sibling, target_predict):
        assert tensor.shape == (batch, width) and tensor.dtype == torch.int64 and tensor.is_contiguous()
    assert predicts.shape == (batch * width,) and predicts.dtype == torch.int32
    assert accept_index.shape[0] == batch and accept_index.dtype == accept_token_num.dtype == torch.int32
    flat = target_predict.reshape(-1)
    for b in range(batch):
        row, node, count = int(retrive_index[b, 0]), 0, 0
        accept_index[b, 0] = row
        while count + 1 < accept_index.shape[1]:
            child = int(retrive_next_token[b, node])
            while child != -1 and int(candidates[b, child]) != int(flat[row]):
                child = int(retrive_next_sibling[b, child])
            if child == -1:
                break
            predicts[row] = flat[row]
            row, node, count = int(retrive_index[b, child]), child, count + 1
            accept_index[b, count] = row
        accept_token_num[b] = count
        predicts[row] = flat[row]


def test_the_sglang_cuda_tree_adapter_hands_the_walker_sglangs_shapes(monkeypatch):
    """sglang-tree-cuda: SGLang's CUDA walker (a stand-in with its host function's checks here) given its lists and
    target_predict as [B, N + 1]: the torch reference's greedy tokens, counts and paths, tree and chain."""
    from specbench.implementations import sglang_jit
    from specbench.trees import DraftTree

    monkeypatch.setattr(sglang_jit, "tree_walker", lambda: _walk_like_sglangs_cuda)
    generator = torch.Generator().manual_seed(5)
    batch, vocab, parents = 40, 3, torch.tensor([-1, -1, 0, 0, 2, 4, 4])
    base = {"target_logits": torch.randn(batch, len(parents) + 1, vocab, generator=generator),
            "draft_token_ids": torch.randint(-1, vocab, (batch, len(parents)), generator=generator),
            "num_draft_tokens": torch.randint(0, len(parents) + 1, (batch,), generator=generator).to(torch.int32),
            "mode": "greedy", "temperatures": torch.zeros(batch)}
    impl = resolve("sglang-tree-cuda")
    for kwargs in ({**base, "tree": DraftTree(parents.expand(batch, -1).contiguous())}, base):
        want, got = verify(**kwargs, backend="torch"), impl.prepare(dict(kwargs))()
        assert same_result(got, want) and int(want.num_accepted.max()) >= 2
        if "tree" in kwargs:
            assert torch.equal(got.accepted_nodes, want.accepted_nodes)
    assert impl.devices == ("cuda",) and impl.trees


def test_the_sglang_target_only_adapter_hands_the_sampler_sglangs_inputs(monkeypatch):
    """sglang-tree-target-only: SGLang's sampler (a stand-in with its host function's checks, which walks to the
    argmax of each row: what any sampler does on one-hot rows) given its lists, coins in [0, 1), zero draft rows
    and the thresholds 1: on one-hot target probabilities, the reference's tokens, counts and paths; refused in
    another mode."""
    from specbench.implementations import sglang_jit
    from specbench.trees import DraftTree

    seen = []

    def sample(predicts, accept_index, accept_token_num, candidates, retrive_index, retrive_next_token,
               retrive_next_sibling, coins, final_coins, target_probs, draft_probs, threshold_single, threshold_acc):
        batch, width = candidates.shape
        assert coins.shape == (batch, width) and final_coins.shape == (batch,) and coins.dtype == torch.float32
        assert bool(((coins >= 0) & (coins < 1)).all()) and bool(((final_coins >= 0) & (final_coins < 1)).all())
        assert target_probs.shape[:2] == (batch, width) and target_probs.dtype == torch.float32
        assert draft_probs.shape == target_probs.shape and not bool(draft_probs.any())
        assert target_probs.is_contiguous() and draft_probs.is_contiguous() and coins.is_contiguous()
        assert (threshold_single, threshold_acc) == (1.0, 1.0)
        seen.append(target_probs.clone())
        _walk_like_sglangs_cuda(predicts, accept_index, accept_token_num, candidates, retrive_index,
                                retrive_next_token, retrive_next_sibling, target_probs.argmax(dim=-1))

    widths = []
    monkeypatch.setattr(sglang_jit, "tree_sampler", lambda vec_size: widths.append(vec_size) or sample)
    generator = torch.Generator().manual_seed(7)
    batch, vocab, parents = 32, 6, torch.tensor([-1, -1, 0, 0, 2, 4])
    rows = torch.randint(0, 3, (batch, len(parents) + 1), generator=generator)  # (few tokens: paths run deep)
    kwargs = {"target_probs": torch.nn.functional.one_hot(rows, vocab).float(), "mode": "probabilistic",
              "draft_token_ids": torch.randint(0, 3, (batch, len(parents)), generator=generator),
              "num_draft_tokens": torch.randint(0, len(parents) + 1, (batch,), generator=generator).to(torch.int32),
              "seeds": torch.arange(batch), "tree": DraftTree(parents.expand(batch, -1).contiguous())}
    impl = resolve("sglang-tree-target-only")
    want, got = verify(**kwargs, backend="torch"), impl.prepare(dict(kwargs))()
    assert same_result(got, want) and torch.equal(got.accepted_nodes, want.accepted_nodes)
    assert int(want.num_accepted.max()) >= 2 and widths == [2]  # (gcd(4, 6))
    # the rows it is given: target logits softmaxed at each request's temperature, one-hot at temperature 0
    # (target probabilities too); a draft id outside [0, V) in a linked node refused, one past the count not
    temperatures = torch.where(torch.arange(batch) % 3 == 0, 0.0, 0.8)
    logits = torch.randn(batch, len(parents) + 1, vocab, generator=generator)
    for given in ({"target_logits": logits}, {"target_probs": torch.softmax(logits, dim=-1)}):
        seen.clear()
        call = {**kwargs, "target_probs": None, **given, "temperatures": temperatures}
        impl.prepare(call)()
        greedy = torch.nn.functional.one_hot(logits.argmax(dim=-1), vocab).float()
        tempered = torch.softmax(logits / 0.8, dim=-1) if "target_logits" in given else torch.softmax(logits, -1)
        assert torch.allclose(seen[0], torch.where((temperatures == 0)[:, None, None], greedy, tempered), atol=1e-6)
    ragged = {**kwargs, "num_draft_tokens": torch.full((batch,), 3, dtype=torch.int32)}
    ragged["draft_token_ids"] = kwargs["draft_token_ids"].clone()
    ragged["draft_token_ids"][0, 5] = -1  # (node 5: past the count of 3)
    impl.prepare(ragged)()
    ragged["draft_token_ids"][1, 1] = vocab
    with pytest.raises(SpecbenchError, match=r"takes draft ids in \[0, 6\) only"):
        impl.prepare(ragged)
    with pytest.raises(SpecbenchError, match="sglang-tree-target-only samples .* only, got mode 'greedy'"):
        impl.prepare({**kwargs, "mode": "greedy"})
    facts = impl.facts()
    assert (facts["modes"], facts["devices"], facts["trees"], facts["cuda_graph"]) == (["probabilistic"], ["cuda"],
                                                                                      True, True)
    assert (facts["invalid_drafts"], facts["seeded"], facts["rng"]) == (False, False, "own")


def test_sglang_jit_writes_one_export_and_sglangs_flags():
    from specbench.implementations import sglang_jit

    source = sglang_jit.entry_source("speculative/tree.cuh", "sglang::verify_tree_greedy", "verify_tree_greedy")
    assert '#include "speculative/tree.cuh"' in source and "#include <tvm/ffi/function.h>" in source
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(verify_tree_greedy, (sglang::verify_tree_greedy));" in source
    assert sglang_jit.build_flags((9, 0)) == ["-std=c++20", "-O3", "--expt-relaxed-constexpr", "-DSGL_CUDA_ARCH=900"]
    assert sglang_jit.build_flags((12, 1))[-1] == "-DSGL_CUDA_ARCH=1210"
    with pytest.raises(SpecbenchError, match="reads 1, 2 or 4 tokens at a time, got 3"):
        sglang_jit.tree_sampler(3)


def test_sglang_jit_says_what_it_lacks_in_one_sentence(tmp_path, monkeypatch):
    import importlib.util

    from specbench.implementations import sglang_jit

    (tmp_path / "sglang").mkdir()
    (tmp_path / "sglang" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(SpecbenchError, match="this SGLang has no CUDA kernel sources where 0.5.23 keeps them"):
        sglang_jit.sglang_jit_dir()
    monkeypatch.setitem(sys.modules, "tvm_ffi", None)  # (an import of it raises ImportError)
    with pytest.raises(SpecbenchError, match=r'apache-tvm-ffi is not installed \(pip install "apache-tvm-ffi\[cpp\]"\)'):
        sglang_jit._load("speculative/tree.cuh", "sglang::verify_tree_greedy", "verify_tree_greedy")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "tvm_ffi" else real(name, *a))
    assert resolve("sglang-tree-cuda").unavailable(torch.device("cuda")) == \
        'apache-tvm-ffi is not installed (pip install "apache-tvm-ffi[cpp]")'
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    with pytest.raises(SpecbenchError, match=r"SGLang is not installed \(pip install sglang\)"):
        sglang_jit.sglang_jit_dir()
    assert sglang_jit._extra_includes("speculative/tree.cuh") == []
    (tmp_path / "flashinfer").mkdir()
    (tmp_path / "flashinfer" / "__init__.py").write_text("")
    with pytest.raises(SpecbenchError, match="this FlashInfer has no headers where SGLang 0.5.23 reads them"):
        sglang_jit._extra_includes("speculative/sampling.cuh")
    (tmp_path / "flashinfer" / "data" / "include").mkdir(parents=True)
    assert sglang_jit._extra_includes("speculative/sampling.cuh")[0].endswith("flashinfer/data/include")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flashinfer" else real(name, *a))
    with pytest.raises(SpecbenchError, match=r"FlashInfer is not installed \(pip install flashinfer-python\)"):
        sglang_jit._extra_includes("speculative/sampling.cuh")


def test_the_sglang_tree_adapter_says_when_the_walker_is_missing(tmp_path, monkeypatch):
    from specbench.implementations import adapters

    path = _sglang_tree_file(tmp_path, monkeypatch, "def another_kernel():\n    pass\n")
    with pytest.raises(SpecbenchError, match="spec_tree.py has no function verify_tree_greedy_kernel_triton"):
        adapters._sglang_tree_walker()
    path.write_text("import triton\n\n@module_decorator\ndef verify_tree_greedy_kernel_triton(x):\n    pass\n")
    with pytest.raises(SpecbenchError, match="verify_tree_greedy_kernel_triton in .* does not load alone: NameError"):
        adapters._sglang_tree_walker()
    path.unlink()
    with pytest.raises(SpecbenchError, match="this SGLang has no spec_tree.py where 0.5.23 keeps"):
        adapters._sglang_tree_walker()


@pytest.mark.parametrize(("name", "content", "message"), [
    ("folder", None, "plugin file .*folder is a folder; give path/to/file.py:function"),
    ("notes.txt", "x = 1\n", "plugin file .*notes.txt is not a Python file"),
    ("typo.py", "def f(:\n", "loading .*typo.py failed: SyntaxError"),
    ("leaves.py", "import sys\nsys.exit(0)\n", "loading .*leaves.py failed: SystemExit: 0"),
])
def test_a_plugin_file_that_cannot_be_loaded_is_one_sentence(tmp_path, name, content, message):
    path = tmp_path / name
    if content is None:
        path.mkdir()
    else:
        path.write_text(content)
    with pytest.raises(SpecbenchError, match=message):
        resolve(f"{path}:f")


def test_an_unreadable_plugin_file_is_one_sentence(tmp_path, monkeypatch):
    path = tmp_path / "locked.py"
    path.write_text("x = 1\n")
    real_open = type(path).open

    def refuse(self, *args, **kwargs):  # chmod 000 does not stop root, who runs many CI containers
        if self == path:
            raise PermissionError(13, "Permission denied")
        return real_open(self, *args, **kwargs)

    monkeypatch.setattr(type(path), "open", refuse)
    with pytest.raises(SpecbenchError, match="cannot read plugin file .*locked.py: Permission denied"):
        resolve(f"{path}:f")


def test_triton_declares_truncation_with_the_token_method_only():
    # its block kernels refuse a truncated call: verify skips those checks and kernels skips those rows
    from specbench import bench

    triton, reference = resolve("triton"), resolve("torch")
    assert triton.truncates("token") and not triton.truncates("block") and reference.truncates("block")
    assert triton.facts()["truncation_methods"] == ["token"]
    case = bench.Case("probabilistic", 1, 2, 50, draft="logits", top_p=0.9, method="block")
    assert bench._unsupported(triton, case, torch.device("cuda")) == (
        "triton declares truncation with the token method only, not block")
    assert bench._unsupported(reference, case, torch.device("cpu")) is None


def test_a_plugin_declares_the_methods_it_truncates_with():
    def fn(**_):
        raise AssertionError("not called")
    declared = sampler(methods=["token", "block"], truncation=True, truncation_methods=["token"])(fn)
    assert declared.truncates("token") and not declared.truncates("block")
    assert declared.facts()["truncation_methods"] == ["token"]
    assert sampler(methods=["token"], truncation=False)(fn).facts()["truncation_methods"] == []
    with pytest.raises(SpecbenchError, match="truncation_methods must be some of the declared methods"):
        sampler(methods=["token"], truncation=True, truncation_methods=["block"])


def test_probabilities_handed_to_a_logits_sampler_are_read_as_verify_reads_them():
    # NaN and negative entries 0 (a logit of -inf), entries above 1 (+inf too) 1 (a logit of 0), scaled by T
    probs = torch.tensor([[[0.5, -0.25, float("nan"), 1.5, float("inf"), float("-inf"), 0.25]]])
    logits = contract.probs_to_logits(probs, torch.tensor([2.0]))
    cleaned = torch.tensor([0.5, 0.0, 0.0, 1.0, 1.0, 0.0, 0.25])
    assert torch.equal(logits[0, 0], 2.0 * torch.log(cleaned))
    assert torch.equal(contract.probs_to_logits(probs, torch.tensor([0.0]))[0, 0], torch.log(cleaned))
