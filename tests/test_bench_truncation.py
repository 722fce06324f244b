"""Truncation and log-probabilities in the benchmark: cases, inputs, records, keys, labels, skipped
rows, the CLI's flags, the charts, compare, the draft converter and the FlashInfer truncated adapter
(with a fake ``flashinfer`` module). CPU, tiny shapes."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import replace

import pytest
import torch
from typer.testing import CliRunner

from specbench import bench, oracle, results, sampling_cases, timing
from specbench.bench_charts import _ok_frame, _variants
from specbench.cli import app
from specbench.compare_inputs import by_key
from specbench.errors import SpecbenchError
from specbench.implementations import adapters, contract, resolve, sampler
from specbench.scenarios import make_profile
from specbench.verification import SamplingParams, VerifyResult, verify

FAST = timing.TimingConfig(warmup=0, min_samples=2, max_samples=2, l2_flush=False)
TINY = ["--device", "cpu", "--vocab-size", "64", "--max-ms", "0", "--min-samples", "2", "--warmup", "0",
        "--no-l2-flush", "--no-charts", "-b", "6", "-k", "2", "-l", "2"]


def _case(mode="probabilistic", batch=6, k=3, vocab=64, draft="logits", **sampling):
    profile = make_profile(k, acceptance_length=2.5)
    return bench.Case(mode, batch, k, vocab, "float32", draft, profile.rates, profile.name, **sampling)


def run(*args: str):
    return CliRunner().invoke(app, list(args))


def _one_line(text: str) -> str:
    return " ".join(text.split())


# --- checks and plans ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("knobs", "said"), [
    ({"top_k": -1}, "top_k must be a whole number >= 0 (0 is off), got -1"),
    ({"top_k": 2.5}, "top_k must be a whole number >= 0"),
    ({"top_p": 0.0}, "top_p must lie in (0, 1] (1 is off), got 0"),
    ({"top_p": 1.5}, "top_p must lie in (0, 1]"),
    ({"min_p": -0.1}, "min_p must lie in [0, 1] (0 is off)"),
    ({"min_p": float("nan")}, "min_p must be a number in [0, 1]"),
    ({"sampling": "both"}, "sampling must be fixed or mixed, got 'both'"),
    ({"sampling": "mixed", "top_p": 0.5}, "the mixed sampling sets every request's own top_k, top_p, min_p"),
])
def test_bad_sampling_values_are_one_sentence(knobs, said):
    with pytest.raises(SpecbenchError, match="^" + said.replace("(", r"\(").replace(")", r"\)")
                       .replace("[", r"\[").replace("]", r"\]")):
        sampling_cases.checked_knobs(**knobs)


def test_off_values_are_the_untruncated_case_itself():
    assert sampling_cases.checked_knobs(top_k=0, top_p=1.0, min_p=0.0) == {
        "top_k": None, "top_p": None, "min_p": None, "sampling": "fixed"}
    profile = make_profile(3, acceptance_length=2.5)
    plain = bench.plan_cases(modes=["probabilistic"], batch_sizes=[4], vocabularies=[(None, 64)], profiles=[profile])
    off = bench.plan_cases(modes=["probabilistic"], batch_sizes=[4], vocabularies=[(None, 64)], profiles=[profile],
                           top_k=0, top_p=1.0, min_p=0.0)
    assert off == plain
    # top_k >= V keeps every token: off at that vocabulary, on at a larger one
    wide = bench.plan_cases(modes=["probabilistic"], batch_sizes=[4], vocabularies=[(None, 64), (None, 128)],
                            profiles=[profile], top_k=64)
    assert [(case.vocab_size, case.top_k) for case in wide] == [(64, None), (128, 64)]
    assert wide[0] == plain[0]


def test_greedy_cases_are_planned_untruncated_and_keep_logprobs():
    profile = make_profile(3, acceptance_length=2.5)
    cases = bench.plan_cases(modes=["greedy", "probabilistic", "synthetic"], batch_sizes=[4],
                             vocabularies=[(None, 64)], profiles=[profile], top_k=5, min_p=0.1, logprobs="raw")
    by_mode = {case.mode: case for case in cases}
    assert (by_mode["greedy"].top_k, by_mode["greedy"].min_p, by_mode["greedy"].logprobs) == (None, None, "raw")
    assert not by_mode["greedy"].truncated
    for mode in ("probabilistic", "synthetic"):
        assert (by_mode[mode].top_k, by_mode[mode].min_p, by_mode[mode].top_p) == (5, 0.1, None)
        assert by_mode[mode].truncated


def test_mixed_sampling_cycles_through_its_six_kinds():
    params = bench.sampling_params(_case(batch=8, sampling="mixed"))
    assert params.temperatures.tolist() == [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0]
    assert params.top_k.tolist() == [0, 0, 50, 0, 0, 50, 0, 0] and params.top_k.dtype == torch.int32
    assert params.top_p.tolist() == pytest.approx([1, 1, 1, 0.9, 1, 0.9, 1, 1])
    assert params.min_p.tolist() == pytest.approx([0, 0, 0, 0, 0.05, 0, 0, 0])
    fixed = bench.sampling_params(_case(top_p=0.9))
    assert (fixed.top_k, fixed.top_p, fixed.min_p) == (None, 0.9, None)
    assert fixed.temperatures.tolist() == [1.0] * 6
    greedy = bench.sampling_params(_case(mode="greedy", draft="none", sampling="mixed"))
    assert greedy.top_k is None and greedy.temperatures.tolist() == [0.0] * 6


def test_inputs_pass_the_sampling_and_logprobs_to_verify():
    kwargs = bench.make_inputs(_case(top_k=7, logprobs="processed")).verify_kwargs()
    assert isinstance(kwargs["sampling"], SamplingParams) and kwargs["sampling"].top_k == 7
    assert kwargs["logprobs"] == "processed" and "temperatures" not in kwargs
    assert "logprobs" not in bench.make_inputs(_case()).verify_kwargs()


# --- records, labels, keys -----------------------------------------------------------------------------------------


def test_records_labels_and_keys_carry_the_parameters_only_when_set():
    plain = bench._record(_case(), "torch", "ok")
    assert not {"top_k", "top_p", "min_p", "sampling", "logprobs"} & set(plain)
    cut = bench._record(_case(top_k=50, top_p=0.9, logprobs="raw"), "torch", "ok")
    assert (cut["top_k"], cut["top_p"], cut["logprobs"]) == (50, 0.9, "raw") and "min_p" not in cut
    assert "sampling" not in cut
    assert bench.describe_record(plain) == "probabilistic/logits B=6 K=3 V=64 float32 L=2.5"
    assert bench.describe_record(cut) == "probabilistic/logits B=6 K=3 V=64 float32 L=2.5 top_k=50 top_p=0.9 logprobs=raw"
    mixed = bench._record(_case(sampling="mixed"), "torch", "ok")
    assert mixed["sampling"] == "mixed" and "sampling=mixed" in bench.describe_record(mixed)
    keys = {bench.record_key(r) for r in (plain, cut, mixed, bench._record(_case(top_k=51), "torch", "ok"))}
    assert len(keys) == 4
    # top_k reads as the whole number it is, however large (a table may hold it as a float)
    assert bench.describe_record({**cut, "top_k": 1234567}).endswith("top_k=1234567 top_p=0.9 logprobs=raw")
    assert bench.describe_record({**cut, "top_k": 50.0}).endswith("top_k=50 top_p=0.9 logprobs=raw")
    # a record written before these fields existed keys as the untruncated case
    assert bench.record_key(plain) == _case().key("torch")


def test_truncated_records_match_the_schema(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(results.SCHEMA_FILE.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    record = bench._record(_case(top_k=50, min_p=0.05, logprobs="processed"), "torch", "skipped", "why")
    mixed = bench._record(_case(sampling="mixed"), "torch", "skipped", "why")
    payload = {"metadata": {"specbench": "0", "torch": "2", "python": "3", "host": "h", "commit": "c",
                            "command": "x", "created": "now", "device": "cpu", "kind": "kernels"},
               "records": [record, mixed]}
    assert list(validator.iter_errors(json.loads(json.dumps(payload)))) == []
    record["top_p"] = 1.5
    assert list(validator.iter_errors(json.loads(json.dumps(payload))))


# --- skipped rows --------------------------------------------------------------------------------------------------


@sampler(name="plain-plugin", target="logits", draft="logits", rng="specbench")
def _plain_plugin(**inputs) -> VerifyResult:
    return verify(backend="torch", **inputs)


def _untruncated_reference(inputs: bench.CaseInputs) -> VerifyResult:
    kwargs = inputs.verify_kwargs()
    kwargs["sampling"] = SamplingParams(temperatures=kwargs["sampling"].temperatures)
    kwargs.pop("logprobs", None)
    return verify(**kwargs, backend="torch")


@pytest.mark.parametrize(("sampling", "said"), [
    ({"top_k": 5}, "plain-plugin does not declare truncation (top_k, top_p, min_p), so it cannot run a truncated case"),
    ({"sampling": "mixed"}, "plain-plugin does not declare truncation"),
    ({"logprobs": "raw"}, "plain-plugin does not declare logprobs, so it cannot return them"),
])
def test_an_implementation_without_the_fact_is_a_skipped_row(sampling, said):
    [record] = bench.run_case(_case(**sampling), [_plain_plugin], config=FAST, reference=_untruncated_reference)
    assert record["status"] == "skipped" and record["reason"].startswith(said) and record["median_us"] is None


def test_an_untruncated_case_still_runs_a_plugin_without_the_facts():
    [record] = bench.run_case(_case(), [_plain_plugin], config=FAST)
    assert record["status"] == "ok"


@pytest.mark.parametrize("draft", ["logits", "probs", "none"])
@pytest.mark.parametrize("sampling", [{"top_k": 3}, {"top_p": 0.5}, {"min_p": 0.3}, {"top_k": 5, "top_p": 0.8},
                                      {"sampling": "mixed"}])
def test_planned_acceptance_holds_under_truncation(draft, sampling):
    case = _case(batch=12, vocab=64, draft=draft, **sampling)
    inputs = bench.make_inputs(case)
    result = bench.torch_reference(inputs)
    assert result.num_accepted.tolist() == inputs.planned_accepted.tolist()


def test_torch_times_a_truncated_case_with_logprobs():
    records = bench.run_case(_case(top_k=5, top_p=0.9, logprobs="processed"), [resolve("torch")], config=FAST)
    assert [r["status"] for r in records] == ["ok"] and records[0]["top_k"] == 5


# --- the CLI --------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("args", "said"), [
    (["--top-p", "1.5"], "--top-p must lie in (0, 1] (1 is off), got 1.5"),
    (["--top-p", "0"], "--top-p must lie in (0, 1] (1 is off), got 0"),
    (["--min-p", "2"], "--min-p must lie in [0, 1] (0 is off), got 2"),
    (["--min-p", "x"], "--min-p takes a number, got 'x'"),
    (["--top-k", "-1"], "--top-k must be a whole number >= 0 (0 is off), got -1"),
    (["--top-k", "5,6"], "--top-k takes one whole number (0 is off), got '5,6'"),
    (["--sampling", "some"], "--sampling must be fixed or mixed, got 'some'"),
    (["--sampling", "mixed", "--top-k", "5"], ("--sampling mixed sets every request's own top_k, top_p and min_p, "
                                               "so it cannot be combined with --top-k; drop one of them")),
    (["--logprobs", "yes"], "--logprobs must be processed or raw, got 'yes'"),
    (["--mode", "greedy", "--top-k", "5"], "--top-k changes nothing in the greedy mode"),
    (["--mode", "greedy", "--sampling", "mixed"], "--sampling mixed changes nothing in the greedy mode"),
])
def test_bad_sampling_flags_exit_2_with_one_sentence(tmp_path, args, said):
    result = run("kernels", *TINY, "-o", str(tmp_path / "out"), *args)
    assert result.exit_code == 2, result.output
    assert said in _one_line(result.stderr) and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_help_states_the_mixed_batch():
    text = _one_line(run("kernels", "--help").stdout.replace("\u2502", " "))  # without the panel's borders
    for flag in ("--top-k", "--top-p", "--min-p", "--sampling", "--logprobs"):
        assert flag in text
    assert sampling_cases.MIXED_TEXT in text


def test_a_truncated_run_records_its_parameters_and_skips_what_cannot_truncate(tmp_path):
    plugin = tmp_path / "plain.py"
    plugin.write_text("from specbench import verify\nfrom specbench.implementations import sampler\n"
                      "@sampler(name='plain', modes=['greedy', 'probabilistic'], target='logits', draft='logits',\n"
                      "         rng='specbench')\n"
                      "def plain(**inputs):\n    return verify(backend='torch', **inputs)\n")
    result = run("kernels", *TINY, "--mode", "greedy,probabilistic", "--top-k", "5", "--impl",
                 f"torch,{plugin}:plain", "-o", str(tmp_path / "out"))
    records = json.loads((tmp_path / "out" / "results.json").read_text())["records"]
    rows = {(r["impl"], r["mode"]): r for r in records}
    assert "the greedy cases run untruncated" in _one_line(result.stdout)
    assert "top_k" not in rows["torch", "greedy"] and rows["plain", "greedy"]["status"] == "ok"
    assert rows["torch", "probabilistic"]["top_k"] == 5
    assert rows["plain", "probabilistic"]["status"] == "skipped"
    assert "does not declare truncation" in rows["plain", "probabilistic"]["reason"]
    assert "top_k=5" in _one_line(result.stdout)
    assert rows["torch", "probabilistic"]["status"] == "ok"


# --- compare and plot ----------------------------------------------------------------------------------------------


def test_rows_of_other_sampling_parameters_never_match():
    base = [bench._record(_case(), "torch", "ok"), bench._record(_case(top_k=5), "torch", "ok")]
    current = [bench._record(_case(top_k=6), "torch", "ok"), bench._record(_case(), "torch", "ok")]
    common = set(by_key(base, "baseline")) & set(by_key(current, "current"))
    assert common == {bench.record_key(base[0])}
    assert bench.record_key(base[0]) == bench.record_key(current[1])


def test_charts_give_each_set_of_parameters_its_own_panels(tmp_path):
    from specbench.bench_charts import render_kernel_charts

    rows = []
    for sampling in ({}, {"top_k": 50}, {"sampling": "mixed"}):
        for batch in (1, 8):
            record = bench._record(_case(batch=batch, **sampling), "torch", "ok", median_us=10.0 * batch,
                                   p20_us=9.0 * batch, p80_us=11.0 * batch, tokens_per_s=1e5, speedup_vs_torch=1.0)
            rows.append(record)
    rows.append(bench._record(replace(_case(top_k=50), target="probs"), "torch", "ok", median_us=1.0, p20_us=1.0,
                              p80_us=1.0, tokens_per_s=1e5, speedup_vs_torch=1.0))
    frame = _ok_frame(rows)
    assert _variants(frame) == ["probabilistic/logits", "probabilistic/logits sampling=mixed",
                                "probabilistic/logits top_k=50", "probabilistic/logits top_k=50 target-probs"]
    paths = render_kernel_charts(rows, tmp_path)
    assert paths and all(p.stat().st_size > 0 for p in paths)


# --- the draft converter -------------------------------------------------------------------------------------------


def _truncated_q(logits: torch.Tensor, temperature: float, **knobs) -> torch.Tensor:
    """q' of one row from the float64 oracle's kept set (asserted exact for the test's values)."""
    values = oracle.truncation_values(logits, temperature, is_probs=False)
    kept = oracle.truncation(values, **knobs)
    assert kept.kept_min == kept.kept_max
    keep = torch.zeros_like(logits, dtype=torch.bool)
    keep[kept.order[:kept.kept_min]] = True
    z = values.to(torch.float64)
    return torch.where(keep, torch.softmax(torch.where(keep, z, float("-inf")), -1), 0.0)


def test_draft_logits_converted_for_a_probs_plugin_are_the_truncated_draft():
    @sampler(target="probs", draft="probs", truncation=True)
    def spy(**inputs):
        return None

    gen = torch.Generator().manual_seed(3)
    batch, k, vocab = 3, 2, 40
    draft_logits = 2 * torch.randn(batch, k, vocab, generator=gen)
    temperatures = torch.tensor([0.7, 0.0, 1.3])
    top_k, top_p, min_p = torch.tensor([4, 4, 0]), torch.tensor([1.0, 0.5, 0.6]), torch.tensor([0.0, 0.0, 0.05])
    kwargs = {"mode": "probabilistic", "target_logits": torch.randn(batch, k + 1, vocab, generator=gen),
              "draft_token_ids": torch.randint(0, vocab, (batch, k), generator=gen), "draft_logits": draft_logits,
              "seeds": torch.arange(batch),
              "sampling": SamplingParams(temperatures=temperatures, top_k=top_k, top_p=top_p, min_p=min_p)}
    q = contract.convert(spy, kwargs)["draft_probs"]
    for b in range(batch):
        for i in range(k):
            if temperatures[b] == 0:  # a greedy request's draft is softmaxed at 1 and never cut
                want = torch.softmax(draft_logits[b, i].double(), -1)
            else:
                want = _truncated_q(draft_logits[b, i], float(temperatures[b]), top_k=int(top_k[b]),
                                    top_p=float(top_p[b]), min_p=float(min_p[b]))
            assert torch.allclose(q[b, i].double(), want, atol=1e-6), (b, i)
    untruncated = contract.convert(spy, {**kwargs, "truncate_draft_logits": False})["draft_probs"]
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    assert torch.allclose(untruncated, torch.softmax(draft_logits / scale, -1), atol=1e-6)


def test_draft_probs_converted_for_a_logits_plugin_are_not_cut_again():
    # draft probabilities are taken as given: a logits plugin gets T * log q and is told not to truncate it
    @sampler(target="logits", draft="logits", truncation=True)
    def spy(**inputs):
        return None

    gen = torch.Generator().manual_seed(4)
    batch, k, vocab = 2, 2, 16
    kwargs = {"mode": "probabilistic", "target_logits": torch.randn(batch, k + 1, vocab, generator=gen),
              "draft_token_ids": torch.randint(0, vocab, (batch, k), generator=gen),
              "draft_probs": torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1),
              "seeds": torch.arange(batch), "sampling": SamplingParams(top_k=3)}
    call = contract.convert(spy, kwargs)
    assert call["truncate_draft_logits"] is False and call["top_k"].tolist() == [3, 3]
    with_logits = contract.convert(spy, {**kwargs, "draft_probs": None, "draft_logits": torch.randn(batch, k, vocab)})
    assert with_logits["truncate_draft_logits"] is True


# --- the FlashInfer truncated adapter, with a fake flashinfer ------------------------------------------------------


@pytest.fixture
def fake_flashinfer(monkeypatch):
    """A ``flashinfer`` package whose sampling functions record their calls and renormalise nothing."""
    calls: list[tuple[str, dict]] = []
    sampling = types.ModuleType("flashinfer.sampling")

    def top_k_renorm_probs(probs, top_k):
        calls.append(("top_k_renorm_probs", {"probs": probs, "top_k": top_k}))
        return probs * 1.0

    def top_p_renorm_probs(probs, top_p):
        calls.append(("top_p_renorm_probs", {"probs": probs, "top_p": top_p}))
        return probs * 1.0

    def chain_speculative_sampling(draft_probs, draft_ids, target_probs, deterministic, seed, offset):
        calls.append(("chain_speculative_sampling", {"draft_probs": draft_probs, "draft_ids": draft_ids,
                                                     "target_probs": target_probs, "seed": seed, "offset": offset}))
        batch, num_rows = target_probs.shape[:2]
        tokens = torch.full((batch, num_rows), -1, dtype=torch.int32)
        tokens[:, 0] = 1
        return tokens, torch.zeros(batch, dtype=torch.int32), torch.zeros(batch, dtype=torch.int32)

    for function in (top_k_renorm_probs, top_p_renorm_probs, chain_speculative_sampling):
        setattr(sampling, function.__name__, function)
    package = types.ModuleType("flashinfer")
    package.sampling = sampling
    monkeypatch.setitem(sys.modules, "flashinfer", package)
    monkeypatch.setitem(sys.modules, "flashinfer.sampling", sampling)
    return calls


def _flashinfer_kwargs(**sampling):
    gen = torch.Generator().manual_seed(0)
    batch, k, vocab = 3, 2, 16
    return {"mode": "probabilistic", "target_logits": torch.randn(batch, k + 1, vocab, generator=gen),
            "draft_token_ids": torch.randint(0, vocab, (batch, k), generator=gen),
            "draft_probs": torch.softmax(torch.randn(batch, k, vocab, generator=gen), -1),
            "seeds": torch.arange(batch), "positions": torch.tensor([0, 5, 9]),
            "sampling": SamplingParams(temperatures=torch.tensor([1.0, 0.5, 1.0]), **sampling)}


def test_flashinfer_truncated_is_registered_lazily_and_declares_truncation():
    impl = resolve("flashinfer-truncated")
    assert impl.truncation and not impl.logprobs and impl.target == impl.draft == "probs"
    assert impl.modes == ("probabilistic",) and impl.devices == ("cuda",) and impl.cuda_graph
    assert "flashinfer" not in sys.modules  # resolving it imports nothing of FlashInfer
    assert adapters.ADAPTERS["flashinfer-truncated"] is impl


def test_flashinfer_truncated_renormalises_top_k_then_top_p_then_chains(fake_flashinfer):
    impl = resolve("flashinfer-truncated")
    kwargs = _flashinfer_kwargs(top_k=torch.tensor([3, 0, 20]), top_p=torch.tensor([0.9, 0.5, 1.0]))
    result = impl.bind(kwargs)()
    assert [name for name, _ in fake_flashinfer] == ["top_k_renorm_probs", "top_p_renorm_probs",
                                                     "chain_speculative_sampling"]
    top_k, top_p, chain = (args for _, args in fake_flashinfer)
    assert top_k["probs"].shape == (9, 16) and top_k["probs"].dtype == torch.float32
    # per request, repeated over its K + 1 rows; specbench's off (0) and anything >= V are V
    assert top_k["top_k"].dtype == torch.int32 and top_k["top_k"].tolist() == [3] * 3 + [16] * 3 + [16] * 3
    assert top_p["top_p"].dtype == torch.float32
    assert top_p["top_p"].tolist() == pytest.approx([0.9] * 3 + [0.5] * 3 + [1.0] * 3)
    assert top_p["probs"].shape == (9, 16)
    assert chain["target_probs"].shape == (3, 3, 16)
    assert torch.equal(chain["target_probs"].reshape(9, 16), top_p["probs"])  # the renormalised rows go on
    assert chain["draft_ids"].dtype == torch.int32 and chain["offset"].tolist() == [0, 15, 27]
    assert torch.equal(chain["draft_probs"], kwargs["draft_probs"])  # draft probabilities as given
    assert isinstance(result, VerifyResult) and result.num_emitted.tolist() == [1, 1, 1]


def test_flashinfer_truncated_applies_only_the_knobs_given(fake_flashinfer):
    resolve("flashinfer-truncated").bind(_flashinfer_kwargs(top_p=0.8))()
    assert [name for name, _ in fake_flashinfer] == ["top_p_renorm_probs", "chain_speculative_sampling"]
    fake_flashinfer.clear()
    resolve("flashinfer-truncated").bind(_flashinfer_kwargs())()
    assert [name for name, _ in fake_flashinfer] == ["chain_speculative_sampling"]


def test_flashinfer_truncated_declines_min_p(fake_flashinfer):
    with pytest.raises(SpecbenchError, match="^flashinfer-truncated declines min_p: FlashInfer has no min-p"):
        resolve("flashinfer-truncated").bind(_flashinfer_kwargs(top_k=5, min_p=torch.tensor([0.0, 0.1, 0.0])))()
    assert [name for name, _ in fake_flashinfer] == []
    # a run makes it a skipped row with that reason, never a timing without min_p
    impl = resolve("flashinfer-truncated")
    cpu = contract.Implementation(**{**{f: getattr(impl, f) for f in impl.__dataclass_fields__}, "devices": ("cpu",)})
    [record] = bench.run_case(_case(draft="probs", min_p=0.1), [cpu], config=FAST, reference=_untruncated_reference)
    assert record["status"] == "skipped" and record["reason"].startswith("flashinfer-truncated declines min_p")


def test_bytes_under_truncation_and_logprobs():
    accepted = torch.tensor([0, 1, 2, 3, 1, 2])
    untruncated = bench.Case("probabilistic", 6, 3, 10, "float32", "none", (0.5, 0.5, 0.5), "x", target="probs")
    cut = bench.Case("probabilistic", 6, 3, 10, "float32", "none", (0.5, 0.5, 0.5), "x", target="probs", top_k=3)
    logits = bench.Case("probabilistic", 6, 3, 10, "float32", "none", (0.5, 0.5, 0.5), "x")
    small = bench.bytes_moved(logits, accepted)[0] - int((accepted + 1).sum()) * 40
    # target probabilities read one value per accepted draft and the terminal row; truncated, every row whole
    assert bench.bytes_moved(untruncated, accepted)[0] == small + 6 * 40 + int(accepted.sum()) * 4
    assert bench.bytes_moved(cut, accepted)[0] == small + int((accepted + 1).sum()) * 40
    with_logprobs = bench.Case("probabilistic", 6, 3, 10, "float32", "none", (0.5, 0.5, 0.5), "x", logprobs="raw")
    assert bench.bytes_moved(with_logprobs, accepted)[0] == bench.bytes_moved(logits, accepted)[0] + 6 * 4 * 4


def _torch_step(*, top_k, top_p, min_p, temperatures, **inputs) -> VerifyResult:
    # a plugin is called with each knob on its own (contract.convert); verify takes them together
    sampling = SamplingParams(temperatures=temperatures, top_k=top_k, top_p=top_p, min_p=min_p)
    return verify(backend="torch", sampling=sampling, **inputs)


@sampler(name="shifted-logprobs", modes=["greedy", "probabilistic"], target="logits", draft="logits",
         rng="specbench", truncation=True, logprobs=True)
def _shifted_logprobs(**inputs) -> VerifyResult:
    result = _torch_step(**inputs)
    return result._replace(logprobs=result.logprobs + 0.5)


@sampler(name="no-logprobs", modes=["greedy", "probabilistic"], target="logits", draft="logits",
         rng="specbench", truncation=True, logprobs=True)
def _no_logprobs(**inputs) -> VerifyResult:
    return _torch_step(**inputs)._replace(logprobs=None)


def test_logprobs_are_checked_against_the_reference():
    case = _case(top_p=0.8, logprobs="processed")
    records = bench.run_case(case, [resolve("torch"), _shifted_logprobs, _no_logprobs], config=FAST)
    by_impl = {r["impl"]: r for r in records}
    assert by_impl["torch"]["status"] == "ok"
    assert by_impl["shifted-logprobs"]["status"] == "FAIL"
    assert by_impl["shifted-logprobs"]["reason"].startswith("logprobs differ from the torch reference's at")
    assert (by_impl["no-logprobs"]["status"], by_impl["no-logprobs"]["reason"]) == (
        "FAIL", "returns no logprobs, though the case asks for them")


@sampler(name="probs-plugin", target="probs", draft="probs", rng="specbench", truncation=True)
def _probs_plugin(*, target_probs, **inputs) -> VerifyResult:
    return _torch_step(target_probs=target_probs, **inputs)


@pytest.mark.parametrize("sampling", [{"top_k": 5}, {"top_p": 0.7, "min_p": 0.05}, {"sampling": "mixed"}])
def test_a_probs_plugin_given_truncated_draft_probs_takes_the_reference_step(sampling):
    # its residuals agree with the reference's only if the converted draft is the truncated q'
    case = _case(batch=24, draft="logits", **sampling)
    records = bench.run_case(case, [resolve("torch"), _probs_plugin], config=FAST)
    assert [r["status"] for r in records] == ["ok", "ok"], records[1]["reason"]
    assert records[1]["converted"] == ["target logits -> probs", "draft logits -> probs"]
    assert records[1]["token_agreement"] == 1.0
