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
from specbench.verification import verify

PLUGIN = textwrap.dedent('''
    from specbench import verify
    from specbench.implementations import sampler

    @sampler(name="copy-of-torch", modes=["greedy", "probabilistic"], target="logits", draft="logits",
             rng="specbench", one_hot=True)
    def declared(**inputs):
        return verify(backend="torch", **inputs)

    def plain(**inputs):
        return None
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
