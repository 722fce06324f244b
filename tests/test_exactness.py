"""`specbench verify`: our backends and the positive control pass; each negative control fails the check
that catches its bug; peers' adapters keep the contract (vLLM's against its documented signature)."""

from __future__ import annotations

import dataclasses
import json
import math
import textwrap
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from specbench import cli, oracle
from specbench.cli import app
from specbench.exactness import DEFAULT_SAMPLES, LAW_CONFIGS, MIN_BONUS_SHARE, Suite
from specbench.exactness_truncation import TRUNCATION_CONFIGS
from specbench.implementations import resolve

CPU = torch.device("cpu")
SAMPLES = 6000
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "my_sampler.py"


def _run(name, modes=("greedy", "probabilistic", "synthetic"), samples=SAMPLES, impl=None, seed=1):
    impl = impl or resolve(name)
    return Suite(impl, CPU, [m for m in modes if m in impl.modes], samples=samples, seed=seed).run()


def _by_name(checks):
    return {(c.mode, c.name): c for c in checks}


@pytest.mark.parametrize("name", ["torch", "textbook"])
def test_correct_samplers_pass_every_check(name):
    checks = _run(name)
    failed = [(c.name, c.detail) for c in checks if c.verdict == "FAIL"]
    assert not failed
    tested = [c for c in checks if c.p_value is not None]
    assert len(tested) >= 30 and all(c.samples > 0 for c in tested)


def test_onehot_acceptance_keeps_the_token_law_and_loses_acceptance():
    checks = _by_name(_run("control-onehot-acceptance"))
    label = LAW_CONFIGS[0].label
    for slot in ("slot 0", "slot 1", "bonus slot"):  # drafts drawn from q: every emitted token still follows p
        assert checks["probabilistic", f"token law, {slot} ({label})"].verdict == "pass"
    count = checks["probabilistic", f"accepted-count law ({label})"]
    assert count.verdict == "FAIL"
    # accepts sum_x q(x) p(x) where sum_x min(p, q) is due
    assert count.acceptance_measured[0] < 0.6 * count.acceptance_due[0]


def test_residual_from_p_fails_the_token_law():
    checks = _by_name(_run("control-residual-from-p"))
    label = LAW_CONFIGS[1].label
    assert checks["probabilistic", f"token law, slot 0 ({label})"].verdict == "FAIL"
    assert checks["probabilistic", f"accepted-count law ({label})"].verdict == "pass"  # acceptance is right


def test_a_sampler_that_skips_the_draft_temperature_fails_where_t_is_not_1():
    # it takes draft logits: given draft probabilities, it gets T * log q and forgets to divide by T too
    checks = _run("control-untempered-draft", modes=["probabilistic"], samples=20000)
    for config in LAW_CONFIGS:
        if config.draft_kind == "none":
            continue
        found = [c for c in checks if c.name.endswith(f"({config.label})")]
        assert len(found) == 5
        failed = [c for c in found if c.verdict == "FAIL"]
        if config.temperature == 1.0:
            assert not failed, [(c.name, c.detail) for c in failed]  # at T = 1 it is right
        else:
            assert failed, config.label


def test_bf16_draft_logits_shift_acceptance_and_the_token_law_by_what_the_oracle_predicts():
    samples = 20000
    checks = _run("control-bf16-draft", modes=["probabilistic"], samples=samples, seed=0)
    index = next(i for i, c in enumerate(LAW_CONFIGS) if c.distance == "offset")
    label = LAW_CONFIGS[index].label
    assert any(c.verdict == "FAIL" for c in checks if c.name.endswith(f"({label})"))
    count = _by_name(checks)["probabilistic", f"accepted-count law ({label})"]
    # the exact effect, from the oracle: q from float32 logits (the drafts' law) against q from the same
    # logits rounded to bfloat16 (what the control tests against)
    target, draft_logits = Suite(resolve("torch"), CPU, [], seed=0)._rows(LAW_CONFIGS[index], index)
    effects = []
    for slot in range(3):
        p = oracle.softmax(target[slot], 1.0)
        q32, q16 = oracle.softmax(draft_logits[slot], 1.0), oracle.softmax(draft_logits[slot].bfloat16().float(), 1.0)
        due = sum(float(q32[x]) * oracle.acceptance_probability(p, q32, x) for x in range(16))
        shifted = sum(float(q32[x]) * oracle.acceptance_probability(p, q16, x) for x in range(16))
        emitted = sum(q32[x] * oracle.emitted_distribution(p, q16, x) for x in range(16))
        effects.append((due, shifted, 0.5 * float((emitted - p).abs().sum())))
    slot = max(range(3), key=lambda i: abs(effects[i][1] - effects[i][0]))
    due, shifted, _ = effects[slot]
    assert count.acceptance_due[slot] == pytest.approx(due)
    at_slot = samples * math.prod(count.acceptance_measured[:slot])  # requests that reached the slot
    standard_error = (shifted * (1 - shifted) / max(at_slot, 1)) ** 0.5
    assert abs(count.acceptance_measured[slot] - shifted) < 4 * standard_error < abs(shifted - due)
    token = _by_name(checks)["probabilistic", f"token law, slot 0 ({label})"]
    assert effects[0][2] > 0.01 and token.total_variation == pytest.approx(effects[0][2], abs=0.01)


def test_a_crashing_or_misshapen_sampler_fails_without_stopping_the_suite():
    from specbench.implementations import sampler

    @sampler(modes=["greedy"], rng="own")
    def crashes(**_):
        raise RuntimeError("illegal memory access")

    checks = _run("", modes=["greedy"], samples=200, impl=crashes)
    assert checks and all(c.verdict in ("FAIL", "skipped") for c in checks)
    assert "raised RuntimeError: illegal memory access" in checks[0].detail


FAKE_VLLM = textwrap.dedent('''
    """A stand-in written to vLLM V1's documented rejection_sample signature and semantics."""
    import torch

    GREEDY_TEMPERATURE = -1
    PLACEHOLDER_TOKEN_ID = -1

    def rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens, draft_probs,
                         target_probs, bonus_token_ids, sampling_metadata):
        batch = len(num_draft_tokens)
        out = torch.full((batch, max_spec_len + 1), PLACEHOLDER_TOKEN_ID, dtype=torch.int32)
        start = 0
        for b, n in enumerate(num_draft_tokens):
            greedy = sampling_metadata.all_greedy or bool(sampling_metadata.temperature[b] == GREEDY_TEMPERATURE)
            for i in range(n + 1):
                if i == n:
                    out[b, i] = bonus_token_ids[b, 0]
                    break
                p, x = target_probs[start + i], int(draft_token_ids[start + i])
                q = torch.zeros_like(p).index_fill_(0, torch.tensor([x]), 1.0) if draft_probs is None \\
                    else draft_probs[start + i]
                if greedy:
                    if x == int(p.argmax()):
                        out[b, i] = x
                        continue
                    out[b, i] = int(p.argmax())
                    break
                if q[x] > 0 and p[x] / q[x] >= torch.rand(()):
                    out[b, i] = x
                    continue
                left = (p - q).clamp_min(0)
                out[b, i] = int(torch.multinomial(left if left.sum() > 0 else p, 1))
                break
            start += n
        return out
''')


def _fake_vllm(root: Path, monkeypatch, module: str, source: str):
    # a vllm package under root holding one module (dotted below vllm), importable until the test ends
    *folders, name = module.split(".")
    package = root.joinpath("vllm", *folders)
    package.mkdir(parents=True)
    for depth in range(len(folders) + 1):
        (root.joinpath("vllm", *folders[:depth]) / "__init__.py").write_text("")
    (package / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(root))
    yield
    import sys

    for loaded in [n for n in sys.modules if n == "vllm" or n.startswith("vllm.")]:
        del sys.modules[loaded]


@pytest.fixture
def fake_vllm(tmp_path, monkeypatch):
    yield from _fake_vllm(tmp_path, monkeypatch, "v1.sample.rejection_sampler", FAKE_VLLM)


def test_the_vllm_adapter_keeps_the_contract_through_vllms_signature(fake_vllm):
    adapter = resolve("vllm")
    assert adapter.unavailable(CPU) is None
    on_cpu = dataclasses.replace(adapter, devices=("cpu",))  # the real kernels need a GPU; the stand-in does not
    checks = _run("", modes=["greedy", "probabilistic"], samples=3000, impl=on_cpu)
    failed = [(c.name, c.detail) for c in checks if c.verdict == "FAIL"]
    assert not failed
    names = {c.name for c in checks if c.verdict == "pass"}
    assert "num_draft_tokens < K: joint law of (count, accepted)" in names  # ragged batches, flattened for vLLM
    assert any(name.startswith("token law, slot 0 (T=1, one-hot drafts)") for name in names)


FAKE_VLLM_MRV2 = textwrap.dedent('''
    """A stand-in written to vLLM Model Runner V2's documented rejection_sample signature and layout: it checks the
    layout it is given, rebuilds specbench's [B, K + 1, V] call from it and follows specbench's torch reference."""
    import torch

    import specbench

    def rejection_sample(target_logits, draft_logits, draft_sampled, cu_num_logits, pos, idx_mapping,
                         expanded_idx_mapping, expanded_local_pos, temperature, seed, num_speculative_steps,
                         synthetic_conditional_rates=None, use_fp64=False, use_block_verification=False, contexts=None,
                         watermarking=None, watermarking_skip_mask=None, watermark_key=None, fly_window_size=0,
                         fly_entropy_threshold=0.3, fly_entropy_top_k=3):
        assert target_logits.ndim == 2 and target_logits.stride(-1) == 1
        assert draft_logits is None or (draft_logits.ndim == 3 and draft_logits.stride(-1) == 1)
        num_logits, vocab = target_logits.shape
        assert draft_sampled.shape == pos.shape == expanded_idx_mapping.shape == expanded_local_pos.shape == (num_logits,)
        num_reqs, steps = cu_num_logits.shape[0] - 1, num_speculative_steps
        target = torch.zeros(num_reqs, steps + 1, vocab, dtype=target_logits.dtype)
        drafts = torch.full((num_reqs, steps), -1, dtype=torch.int64)
        counts = torch.zeros(num_reqs, dtype=torch.int32)
        positions = torch.zeros(num_reqs, dtype=torch.int64)
        starts = cu_num_logits.tolist()
        for r in range(num_reqs):
            lo, hi = starts[r], starts[r + 1]
            n, state = hi - lo - 1, int(idx_mapping[r])
            assert expanded_idx_mapping[lo:hi].tolist() == [state] * (n + 1)
            assert expanded_local_pos[lo:hi].tolist() == list(range(n + 1))
            assert pos[lo:hi].tolist() == list(range(int(pos[lo]), int(pos[lo]) + n + 1))
            target[r, :n + 1] = target_logits[lo:hi]  # already divided by the temperature
            drafts[r, :n] = draft_sampled[lo + 1:hi]
            counts[r], positions[r] = n, pos[lo]
        states = idx_mapping.long()
        temps = temperature[states]
        # the target comes tempered and the drafts not: specbench's call at temperature 1 (0 stays greedy), with
        # the draft logits divided here as the kernel divides them
        kwargs = {"draft_token_ids": drafts, "num_draft_tokens": counts, "temperatures": (temps > 0).float(),
                  "seeds": seed[states], "positions": positions, "check_values": False,
                  "method": "block" if use_block_verification else "token"}
        if draft_logits is not None:
            kwargs["draft_logits"] = draft_logits[states] / torch.where(temps > 0, temps, 1.0)[:, None, None]
        result = specbench.verify(target, backend="torch", **kwargs)
        sampled = torch.full((num_reqs, steps + 1), 123456789, dtype=torch.int64)  # unwritten past the emitted
        for r in range(num_reqs):
            emitted = int(result.num_emitted[r])
            sampled[r, :emitted] = result.output_token_ids[r, :emitted]
        return sampled, result.num_emitted.to(torch.int32)
''')


@pytest.fixture
def fake_vllm_mrv2(tmp_path, monkeypatch):
    yield from _fake_vllm(tmp_path, monkeypatch, "v1.worker.gpu.spec_decode.rejection_sampler_utils", FAKE_VLLM_MRV2)


@pytest.mark.parametrize("method", ["token", "block"])
def test_the_vllm_mrv2_adapter_keeps_the_contract_through_its_signature(fake_vllm_mrv2, method):
    adapter = resolve("vllm-mrv2")
    assert adapter.unavailable(CPU) is None
    on_cpu = dataclasses.replace(adapter, devices=("cpu",))  # the real kernels need a GPU; the stand-in does not
    checks = Suite(on_cpu, CPU, ["greedy", "probabilistic"], samples=3000, seed=1, method=method).run()
    failed = [(c.name, c.detail) for c in checks if c.verdict == "FAIL"]
    assert not failed
    names = {c.name for c in checks if c.verdict == "pass"}
    assert "num_draft_tokens < K: joint law of (count, accepted)" in names  # ragged batches, flattened as vLLM's
    assert "poisoned output buffers" in names  # the slots past the emitted tokens come back -1


# --- the command ------------------------------------------------------------------------------------------------

runner = CliRunner()


def test_verify_passes_our_backend_and_writes_json(tmp_path):
    report = tmp_path / "verify.json"
    result = runner.invoke(app, ["verify", "--impl", "torch", "--samples", "3000", "--json", str(report)])
    assert result.exit_code == 0, result.output
    assert "torch: 0 failed" in result.stdout and "each held to significance /" in result.stdout
    data = json.loads(report.read_text())
    (entry,) = data["implementations"]
    assert entry["facts"]["rng"] == "specbench" and data["metadata"]["significance"] == 0.001
    assert data["metadata"]["interrupted"] is False and "alpha" not in data["metadata"]
    assert {c["verdict"] for c in entry["checks"]} <= {"pass", "skipped"} and len(entry["checks"]) > 50


def test_verify_exits_1_on_a_negative_control():
    result = runner.invoke(app, ["verify", "--impl", "control-residual-from-p", "--samples", "3000"])
    assert result.exit_code == 1
    assert "FAIL" in result.stdout and "control-residual-from-p:" in result.stdout


def test_the_methods_of_one_implementation_share_the_bonferroni_budget(tmp_path):
    # --significance is the chance of a false FAIL in any check of the run: every test of both methods is held to
    # P / (the tests of both), the summary says so, and a block control still fails under that level
    report = tmp_path / "verify.json"
    result = runner.invoke(app, ["verify", "--impl", "control-block-token-residual", "--method", "token,block", "-m",
                                 "probabilistic", "-n", "3000", "--seed", "1", "--json", str(report)])
    assert result.exit_code == 1, result.output
    token, block = json.loads(report.read_text())["implementations"]
    tests = sum(c["p_value"] is not None for entry in (token, block) for c in entry["checks"])
    assert tests > sum(c["p_value"] is not None for c in token["checks"]) > 0
    assert token["level"] == block["level"] == pytest.approx(0.001 / tests)
    out = " ".join(result.stdout.split())
    assert out.count(f"of the {tests} statistical tests of its 2 methods, each held to significance / {tests}") == 2
    assert [c for c in block["checks"] if c["verdict"] == "FAIL"] and "(method block): 0 failed" not in out


def test_a_verdict_is_judged_again_when_a_shared_budget_grows():
    # a test judged at P / 2 (p = 4e-4 < 5e-4: FAIL) passes once a second suite's two tests join the budget (P / 4 =
    # 2.5e-4); a FAIL the check gave itself (an exact part, beside its p-value) stays a FAIL at any level
    from specbench.exactness_base import CheckResult

    first = Suite(resolve("torch"), CPU, [])
    first.results = [CheckResult("law", "probabilistic", "pass", "chi-square", p_value=4e-4),
                     CheckResult("law with a count out of range", "probabilistic", "FAIL", "chi-square", p_value=0.9)]
    assert [c.verdict for c in first.finished()] == ["FAIL", "FAIL"]
    second = Suite(resolve("torch"), CPU, [], shared_with=first)
    second.results = [CheckResult("law", "greedy", "pass", "chi-square", p_value=0.5) for _ in range(2)]
    assert first.level == second.level == pytest.approx(1e-3 / 4)
    assert [c.verdict for c in first.finished()] == ["pass", "FAIL"]


def test_interpret_without_a_triton_implementation_is_a_note():
    # nothing runs under the interpreter, so the default sample count is not cut to the interpreter's either
    result = runner.invoke(app, ["verify", "--impl", "torch", "--interpret", "-m", "greedy"])
    assert result.exit_code == 0, result.output
    assert "note: --interpret has no Triton implementation to run here (torch): the checks run on the CPU, 20,000 " \
           "requests each" in " ".join(result.stdout.split())


def test_verify_help_gives_the_least_sample_count():
    result = runner.invoke(app, ["verify", "--help"], env={"COLUMNS": "250"})
    assert "Requests per statistical check, at least 50" in result.stdout


def test_the_example_plugin_runs_through_verify_and_kernels(tmp_path):
    # the example draws from torch's global generator: seeded here, so its verdict does not depend on
    # which tests ran before (a full run once drew a false alarm, p = 6.6e-7 against a Bonferroni level of
    # 2.4e-5; 40 seeds in a row pass)
    torch.manual_seed(0)
    spec = f"{EXAMPLE}:my_sampler"
    result = runner.invoke(app, ["verify", "--impl", spec, "--samples", "1500"])
    assert result.exit_code == 0, result.output
    assert "my_sampler: 0 failed" in result.stdout
    out = tmp_path / "kernels"
    # every option that has a machine default is given, so a GPU machine runs the same rows (its default
    # grid adds CUDA-graph rows, which this plugin, declared without graph support, would skip)
    result = runner.invoke(app, ["kernels", "--impl", f"torch,{spec}", "--mode", "probabilistic", "--batch-size", "4",
                                 "--vocab-size", "64", "--num-spec-tokens", "3", "--draft", "logits,probs,none",
                                 "--acceptance-length", "3,full", "--no-cuda-graph", "--no-charts", "--max-ms", "20",
                                 "--min-samples", "2", "--output", str(out)])
    assert result.exit_code == 0, result.output
    records = json.loads((out / "results.json").read_text())["records"]
    mine = [r for r in records if r["impl"] == "my_sampler"]
    assert len(mine) == 6 and all(r["status"] == "ok" for r in mine), [(r["draft"], r["reason"]) for r in mine]
    from_logits = [r for r in mine if r["draft"] == "logits"]
    assert all(r["converted"] == ["target logits -> probs", "draft logits -> probs"] for r in from_logits)
    assert all(r["conversion"] == "outside" for r in mine)


@pytest.mark.parametrize(("args", "message"), [
    (["--impl", "tensorrt-llm"], "unknown implementation 'tensorrt-llm'"),
    # a repeated --impl adds to the list, as a comma does: the first name is not dropped
    (["--impl", "tensorrt-llm", "--impl", "torch", "--samples", "50"], "unknown implementation 'tensorrt-llm'"),
    (["--impl", "torch", "--mode", "beam"], "unknown mode 'beam'"),
    (["--impl", "torch", "--mode", ""], "--mode needs at least one of greedy, probabilistic, synthetic or all, got ''"),
    (["--impl", "torch", "--json", ""], "--json needs a file name, got ''"),
    (["--impl", "torch", "--mode", "all,greedy"], "--mode all means every mode, so it stands alone, got 'all,greedy'"),
    (["--impl", "torch", "--samples", "many"], "--samples takes a whole number, got 'many'"),
    (["--impl", "torch", "--significance", "2"], "--significance must be in [1e-12, 1), got 2"),
    (["--impl", "torch", "--significance", "nan"], "--significance takes a number, got 'nan'"),
    (["--impl", "torch", "--alpha", "0.01"], "No such option: --alpha"),  # sweep's --alpha is an acceptance rate
    (["--impl", "torch", "--samples", "1000000000000"], "--samples 1,000,000,000,000 needs about 3,814,697 GiB"),
    (["--impl", "textbook", "--mode", "synthetic"], ("verify checked nothing of textbook in the modes asked for "
                                                     "(synthetic): textbook declares the modes probabilistic, not "
                                                     "synthetic")),
    (["--impl", "flashinfer", "--device", "cpu"], "no implementation given can run here"),
    (["--impl", "torch", "--seed", "-1"], "--seed must be in [0, 2**62), got -1"),  # as kernels writes the bound
    # an empty item is malformed, as in kernels: not dropped
    (["--impl", "torch,"], "--impl takes comma-separated values, got 'torch,'"),
    (["--impl", "torch", "--impl", " "], "--impl takes comma-separated values, got ' '"),
    (["--impl", "torch", "--mode", "greedy,"], "--mode takes comma-separated values, got 'greedy,'"),
    (["--impl", "torch", "--mode", "greedy,,synthetic"], "--mode takes comma-separated values, got 'greedy,,"),
    (["--impl", "my_sampler.py"], "'my_sampler.py' is a path, not an implementation: give a plugin file as FILE.py:"),
])
def test_unusable_input_is_one_sentence_and_exit_2(args, message, capsys):
    assert cli.run(["verify", *args]) == 2
    stderr = capsys.readouterr().err
    assert len(stderr.strip().splitlines()) == 1 and message in stderr, stderr


def test_every_statistical_check_of_the_reference_runs_at_the_default_sample_count():
    # the rarest slot is the bonus one: the rows are drawn so that at least 1% of the requests reach it
    for seed in (0, 1, 2):
        checks = _run("torch", samples=DEFAULT_SAMPLES, seed=seed)
        skipped = [(c.mode, c.name, c.detail) for c in checks if c.test == "chi-square" and c.verdict == "skipped"]
        assert not skipped, (seed, skipped)
        assert not [c for c in checks if c.verdict == "FAIL"]
        bonus = [c.samples for c in checks if c.name.startswith("token law, bonus slot")]
        assert len(bonus) == len(LAW_CONFIGS) + len(TRUNCATION_CONFIGS)
        assert min(bonus) >= MIN_BONUS_SHARE * DEFAULT_SAMPLES / 2


def _plugin(tmp_path, body: str) -> str:
    path = tmp_path / "leaving.py"
    path.write_text(textwrap.dedent("""
        import os, signal, sys, time
        from specbench import verify
        from specbench.implementations import sampler

        calls = []

        @sampler(modes=["greedy"], rng="own")
        def leaving(**inputs):
    """) + textwrap.indent(body, "    ") + "\n")
    return f"{path}:leaving"


@pytest.mark.parametrize("body, said", [
    ("sys.exit(0)", "called sys.exit(0)"),
    ("raise SystemExit", "called sys.exit(None)"),
    ("raise KeyboardInterrupt", "raised KeyboardInterrupt while nobody pressed Ctrl-C"),
])
def test_a_plugin_that_tries_to_end_the_run_fails_its_checks(tmp_path, body, said, capsys):
    assert cli.run(["verify", "--impl", _plugin(tmp_path, body), "--samples", "50"]) == 1
    out = capsys.readouterr().out
    assert said in " ".join(out.split()) and "leaving: 4 failed" in out


def test_ctrl_c_keeps_the_finished_checks_in_the_table_and_the_json(tmp_path, capsys):
    # a real SIGINT arrives while the plugin runs: the suite stops, as a person pressing Ctrl-C wants
    body = ("calls.append(1)\n"
            "if len(calls) == 4:\n"  # the first call of the poisoned-buffers check, after three checks of one call
            "    os.kill(os.getpid(), signal.SIGINT)\n    time.sleep(5)\n"
            "return verify(backend='torch', **inputs)")
    report = tmp_path / "verify.json"
    status = cli.run(["verify", "--impl", _plugin(tmp_path, body), "--samples", "50", "--json", str(report)])
    captured = capsys.readouterr()
    out = " ".join(captured.out.split())
    assert status == 130 and "interrupted: 4 checks finished; they are in" in out, captured.err
    data = json.loads(report.read_text())
    assert data["metadata"]["interrupted"] is True
    (entry,) = data["implementations"]
    assert [c["name"] for c in entry["checks"]] == [
        "greedy identity (ties, NaN, +-inf)", "-1 and out-of-range draft ids",
        "num_draft_tokens < K: nothing past a request's count", "num_draft_tokens < K: same as the reference"]
    assert "greedy identity (ties, NaN, +-inf)" in out
