"""Step costs: cost files (CSV, TOML), interpolation and refusals, the roofline, sampler times, sources."""

from __future__ import annotations

import gzip
import itertools
import math
import os
from pathlib import Path

import pytest

from specbench.errors import SpecbenchError
from specbench.results import ResultsWriter
from specbench.step_costs import (
    GPUS,
    MODELS,
    PUBLISHED,
    GpuSpec,
    ModelSpec,
    StepCost,
    compare_published,
    load_cost_file,
    resolve_gpu,
    roofline,
)

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_CSV = ROOT / "scenarios" / "costs" / "vllm-mlx-699-nemotron-lightning-m5max.csv"
EXAMPLE_TOML = EXAMPLE_CSV.with_suffix(".toml")
WIDTHS = {1: 8.47, 2: 13.49, 3: 15.64, 5: 20.67, 8: 28.13}  # vllm-mlx #699


def write(tmp_path: Path, text: str, name: str = "costs.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ---- cost files


@pytest.mark.parametrize("path", [EXAMPLE_CSV, EXAMPLE_TOML], ids=["csv", "toml"])
def test_example_cost_file_gives_the_published_widths(path):
    costs = load_cost_file(path)
    for width, ms in WIDTHS.items():
        step = costs.step(1, width - 1)
        assert step.target_ms == pytest.approx(ms)
        assert step.sources == {"target": "measured", "draft": "none", "sampler": "none", "overhead": "none"}
        assert step.total_ms == pytest.approx(ms)
    assert any("linear in tokens" in line for line in costs.describe())


def test_interpolation_is_linear_in_tokens():
    costs = load_cost_file(EXAMPLE_CSV)
    assert costs.step(1, 3).target_ms == pytest.approx((15.64 + 20.67) / 2)  # 4 tokens, halfway from 3 to 5
    assert costs.step(1, 6).target_ms == pytest.approx(20.67 + (28.13 - 20.67) * 2 / 3)  # 7 tokens


def test_short_form_rows_are_the_target(tmp_path):
    costs = load_cost_file(write(tmp_path, "# a comment\nbatch,tokens,ms\n2,2,5.0\n2,8,9.0\n"))
    assert costs.step(2, 1).target_ms == pytest.approx(5 + 4 * 2 / 6)
    assert costs.step(2, 0).target_ms == pytest.approx(5.0)


def test_all_parts_and_their_sources(tmp_path):
    text = ("part,batch,tokens,ms\n"
            "target,4,4,10\ntarget,4,16,14\n"
            "draft,4,4,1.5\n"
            "sampler,4,4,0.1\nsampler,4,16,0.3\n"
            "overhead,4,,0.5\n")
    costs = load_cost_file(write(tmp_path, text))
    step = costs.step(4, 2)  # 12 tokens
    assert step.target_ms == pytest.approx(10 + 4 * 8 / 12)
    assert step.draft_ms == pytest.approx(2 * 1.5)
    assert step.sampler_ms == pytest.approx(0.1 + 0.2 * 8 / 12)
    assert step.overhead_ms == pytest.approx(0.5)
    assert set(step.sources.values()) == {"measured"}
    assert step.total_ms == pytest.approx(step.target_ms + 3 + step.sampler_ms + 0.5)
    plain = costs.step(4, 0)  # no drafts: no draft cost; the sampler at tokens = B is measured here
    assert plain.draft_ms == 0 and plain.sources["draft"] == "none"
    assert plain.sampler_ms == pytest.approx(0.1) and plain.sources["sampler"] == "measured"


def test_no_speculation_sampler_outside_the_measured_rows_is_none(tmp_path):
    costs = load_cost_file(write(tmp_path, "part,batch,tokens,ms\ntarget,1,1,5\ntarget,1,4,6\nsampler,1,4,0.2\n"))
    assert costs.step(1, 0).sources["sampler"] == "none"
    assert costs.step(1, 3).sources["sampler"] == "measured"


def test_toml_with_parts(tmp_path):
    text = ('source = "a test"\n'
            '[[rows]]\nbatch = 1\ntokens = 1\nms = 2.0\n'
            '[[rows]]\nbatch = 1\ntokens = 3\nms = 3.0\n'
            '[[rows]]\npart = "draft"\nbatch = 1\ntokens = 1\nms = 0.25\n')
    costs = load_cost_file(write(tmp_path, text, "costs.toml"))
    step = costs.step(1, 2)
    assert (step.target_ms, step.draft_ms) == (pytest.approx(3.0), pytest.approx(0.5))
    assert "  source: a test" in costs.describe()


BAD_FILES = {
    "negative": ("batch,tokens,ms\n1,1,-2\n", "line 2: time '-2' is negative"),
    "nan": ("batch,tokens,ms\n1,1,nan\n", "line 2: time 'nan' is not a finite number"),
    "text": ("batch,tokens,ms\n1,1,fast\n", "line 2: time 'fast' is not a number"),
    "non-monotone": ("batch,tokens,ms\n1,1,5\n1,4,4\n",
                     "line 3: target at batch 1 takes 4 ms at 4 tokens, less than 5 ms at 1; times must not fall"),
    "repeat": ("batch,tokens,ms\n1,1,5\n1,1,6\n", "line 3: target at batch 1 and 1 tokens repeats"),
    "batch": ("batch,tokens,ms\n0,1,5\n", "line 2: batch '0' must be a positive integer"),
    "part": ("part,batch,tokens,ms\nverifier,1,1,5\n", "line 2: part 'verifier' is not one of"),
    "no target": ("part,batch,tokens,ms\ndraft,1,1,5\n", "has no target rows"),
    "header": ("batch,ms\n1,5\n", "the header must be"),
    "cells": ("batch,tokens,ms\n1,1\n", "line 2: 2 cells where the header has 3"),
    "tokens": ("part,batch,tokens,ms\ntarget,1,,5\n", "tokens is missing"),
    "empty": ("# only a comment\n", "holds no header and no rows"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_cost_file_is_one_sentence(tmp_path, case):
    text, words = BAD_FILES[case]
    with pytest.raises(SpecbenchError) as info:
        load_cost_file(write(tmp_path, text))
    message = str(info.value)
    assert words in message and "\n" not in message
    assert "costs.csv" in message  # names the file


def test_bad_toml_rows(tmp_path):
    with pytest.raises(SpecbenchError, match=r"costs.toml row 2: time -1 is negative"):
        load_cost_file(write(tmp_path, "[[rows]]\nbatch=1\ntokens=1\nms=1\n[[rows]]\nbatch=1\ntokens=2\nms=-1\n",
                             "costs.toml"))
    with pytest.raises(SpecbenchError, match=r"needs its rows as \[\[rows\]\] tables"):
        load_cost_file(write(tmp_path, 'rows = "no"\n', "costs.toml"))
    with pytest.raises(SpecbenchError, match=r"is not valid TOML"):
        load_cost_file(write(tmp_path, "[[rows]\n", "costs.toml"))


def test_missing_batch_and_extrapolation_are_refused():
    costs = load_cost_file(EXAMPLE_CSV)
    with pytest.raises(SpecbenchError, match=r"has no target rows at batch 2 \(measured batches: 1\); costs are not "
                                             r"interpolated or extrapolated between batches"):
        costs.step(2, 1)
    with pytest.raises(SpecbenchError, match=r"measures target at batch 1 from 1 to 8 tokens, not 9; costs are not "
                                             r"extrapolated"):
        costs.step(1, 8)
    with pytest.raises(SpecbenchError, match="must be a positive integer"):
        costs.step(0, 1)


def test_missing_file(tmp_path):
    with pytest.raises(SpecbenchError, match="cannot read cost file"):
        load_cost_file(tmp_path / "absent.csv")


# ---- the roofline


def test_roofline_is_monotone_in_batch_and_drafts():
    model = roofline(MODELS["Llama-3.1-8B"], "H100", draft=MODELS["Qwen3-8B"], context_length=4096)
    for k in range(6):
        totals = [model.step(b, k).total_ms for b in (1, 2, 8, 32, 128, 512)]
        assert totals == sorted(totals)
        assert totals[-1] > totals[0]  # the KV reads and, at last, the compute grow with B
    for b in (1, 16, 256):
        totals = [model.step(b, k).total_ms for k in range(8)]
        assert all(later > earlier for earlier, later in itertools.pairwise(totals))  # each draft step costs


def test_roofline_memory_and_compute_bounds():
    llama = MODELS["Llama-3.1-8B"]
    h100 = GPUS["H100"]
    model = roofline(llama, h100, context_length=0)
    read = (8.03e9 - 128256 * 4096) * 2
    assert model.step(1, 0).target_ms == pytest.approx(read / 3.35e12 * 1e3)  # memory bound at one token
    tokens = 8192  # compute bound: 2 * active (without the gathered embedding) * T / peak
    assert model.forward_ms(llama, tokens, 1) == pytest.approx(2 * (8.03e9 - 128256 * 4096) * tokens / 989.4e12 * 1e3)
    with_kv = roofline(llama, h100, context_length=1000)
    kv = 2 * 32 * 8 * 128 * 2 * 1000  # bytes of one sequence's context
    assert with_kv.step(1, 0).target_ms == pytest.approx((read + kv) / 3.35e12 * 1e3)
    assert with_kv.step(4, 0).target_ms == pytest.approx((read + 4 * kv) / 3.35e12 * 1e3)


def test_moe_reads_active_params_at_one_token_and_all_experts_at_many():
    moe = MODELS["Qwen3-30B-A3B"]
    embedding = 151936 * 2048
    assert moe.params_read(1) == pytest.approx(3.3e9 - embedding)
    assert moe.params_read(10_000) == pytest.approx(30.5e9 - embedding)
    expert = (30.5e9 - 3.3e9) / (128 - 8)
    touched = 128 * (1 - (1 - 8 / 128) ** 4)
    assert moe.params_read(4) == pytest.approx(3.3e9 - 8 * expert + touched * expert - embedding)
    reads = [moe.params_read(t) for t in (1, 2, 4, 16, 64, 256)]
    assert reads == sorted(reads)
    dense_twin = ModelSpec("dense twin", 30.5e9, 2.0, embedding_params=embedding)
    on_h200 = roofline(moe, "H200", context_length=0)
    assert on_h200.forward_ms(moe, 1, 1) < on_h200.forward_ms(dense_twin, 1, 1) / 5
    memory_only = roofline(moe, GpuSpec("bandwidth only", 4.8e12, None, 1e9, "test"), context_length=0)
    assert memory_only.forward_ms(moe, 4096, 1) == pytest.approx(memory_only.forward_ms(dense_twin, 4096, 1))
    # compute counts the active parameters only: at many tokens the MoE is 3.3/30.5 of its dense twin
    ratio = (3.3e9 - embedding) / (30.5e9 - embedding)
    assert on_h200.forward_ms(moe, 65536, 1) == pytest.approx(ratio * on_h200.forward_ms(dense_twin, 65536, 1))


def test_model_spec_checks():
    with pytest.raises(SpecbenchError, match="exceed its params"):
        ModelSpec("bad", 1e9, 2.0, active_params=2e9)
    with pytest.raises(SpecbenchError, match="num_experts > experts_per_token"):
        ModelSpec("bad", 10e9, 2.0, active_params=1e9)


def test_gpus_are_cited_and_found_by_name():
    for spec in GPUS.values():
        assert spec.source and spec.bandwidth > 0 and spec.memory_bytes > 0
    assert resolve_gpu("h100") is GPUS["H100"] and resolve_gpu("m5 max") is GPUS["M5-Max"]
    own = GpuSpec("mine", 1e12, None, 1e9, "measured by me")
    assert resolve_gpu(own) is own
    with pytest.raises(SpecbenchError, match="unknown GPU 'A7'; known GPUs: H100"):
        resolve_gpu("A7")
    for model in MODELS.values():
        assert model.source


def test_gpu_without_flops_is_memory_bound_only():
    model = roofline(MODELS["Llama-3.1-8B"], "M5-Max", context_length=0)
    llama = MODELS["Llama-3.1-8B"]
    big = model.forward_ms(llama, 100_000, 1)
    assert big == pytest.approx(model.forward_ms(llama, 1, 1))
    assert any("no published FLOP/s" in line for line in model.describe())


def test_roofline_sources_and_overhead():
    bare = roofline(MODELS["Qwen3-8B"], "B200", context_length=128)
    assert bare.step(8, 3).sources == {"target": "modelled", "draft": "none", "sampler": "none", "overhead": "none"}
    full = roofline(MODELS["Qwen3-32B"], "MI300X", draft=MODELS["Qwen3-8B"], context_length=128, overhead_ms=0.4)
    step = full.step(8, 3)
    assert step.sources == {"target": "modelled", "draft": "modelled", "sampler": "none", "overhead": "modelled"}
    assert step.overhead_ms == 0.4 and step.draft_ms > 0
    assert full.step(8, 0).draft_ms == 0 and full.step(8, 0).sources["draft"] == "none"
    text = "\n".join(full.describe())
    assert "MI300X" in text and "draft: modelled, Qwen3-8B" in text and "0.4 ms a step as given" in text
    with pytest.raises(SpecbenchError, match="context length"):
        roofline(MODELS["Qwen3-8B"], "H100", context_length=-1)


# ---- sampler times from a `specbench kernels` results file


def kernels_record(batch, k, vocab, median_us, impl="triton"):
    return {"kind": "kernels", "mode": "probabilistic", "impl": impl, "batch_size": batch, "num_spec_tokens": k,
            "vocab_size": vocab, "model": "x", "dtype": "float32", "median_us": median_us, "status": "ok"}


@pytest.fixture
def sampler_results(tmp_path):
    records = [kernels_record(8, 3, 128256, 40.0), kernels_record(8, 3, 128256, 90.0, impl="torch"),
               kernels_record(8, 7, 128256, 80.0), kernels_record(8, 3, 151936, 500.0),
               {**kernels_record(16, 3, 128256, 1.0), "status": "failed"}]
    ResultsWriter(tmp_path / "run", {"kind": "kernels", "device": "NVIDIA H200"}, records)
    return tmp_path / "run"


def test_sampler_time_from_a_results_file(sampler_results):
    model = roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=sampler_results)
    step = model.step(8, 3)
    assert step.sampler_ms == pytest.approx(0.040)  # the fastest record at B=8, K=3, V=128256
    assert step.sources["sampler"] == "measured"
    assert model.sampler_record(8, 3)[0]["impl"] == "triton"
    assert model.step(8, 5).sampler_ms == pytest.approx(0.060)  # linear in K+1 between K=3 and K=7
    assert [r["num_spec_tokens"] for r in model.sampler_record(8, 5)] == [3, 7]
    assert model.step(8, 0).sources["sampler"] == "none"
    assert any("NVIDIA H200 at V=128256" in line for line in model.describe())
    qwen = roofline(MODELS["Qwen3-8B"], "H200", context_length=0, sampler_results=sampler_results / "results.json")
    assert qwen.step(8, 3).sampler_ms == pytest.approx(0.5)  # the nearest V to Qwen3's 151936


def test_sampler_time_from_a_results_file_kept_compressed(sampler_results, tmp_path):
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "results.json.gz").write_bytes(gzip.compress((sampler_results / "results.json").read_bytes()))
    model = roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=kept)
    assert model.step(8, 3).sampler_ms == pytest.approx(0.040)


def test_sampler_refuses_what_was_not_measured(sampler_results):
    model = roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=sampler_results)
    with pytest.raises(SpecbenchError, match=r"no kernels records at batch 16 .*measured batches: 8"):
        model.step(16, 3)  # its only record there failed
    with pytest.raises(SpecbenchError, match=r"measures the sampler at batch 8 for K = 3, 7, not 9; sampler times are "
                                             r"not extrapolated"):
        model.step(8, 9)


def test_sampler_results_that_cannot_be_read(tmp_path):
    (tmp_path / "results.json").write_text("[]")
    with pytest.raises(SpecbenchError, match="not a specbench results file"):
        roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=tmp_path)
    with pytest.raises(SpecbenchError, match="not a readable specbench results file"):
        roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=tmp_path / "absent")


def test_a_shipped_kernels_run_reads():
    run = ROOT / "results" / "h200-kernels"
    if not (run / "results.json").is_file():
        pytest.skip("results/h200-kernels is not in this checkout")
    model = roofline(MODELS["Llama-3.1-8B"], "H200", context_length=0, sampler_results=run)
    assert 0 < model.step(64, 3).sampler_ms < model.step(64, 3).target_ms


# ---- published measurements


def test_published_comparison_states_each_error():
    rows = compare_published()
    assert len(rows) == len(PUBLISHED) >= 2
    assert len({row["source"].split(" (")[0] for row in rows}) >= 2  # at least two separate publications
    for row in rows:
        assert row["error"] == pytest.approx((row["modelled_ms"] - row["measured_ms"]) / row["measured_ms"])
        assert math.isfinite(row["error"])
    widths = {row["tokens"]: row["measured_ms"] for row in rows if "vllm-mlx #699" in row["source"]}
    assert widths == pytest.approx(WIDTHS)


def test_step_cost_total():
    assert StepCost(1.0, 2.0, 0.25, 0.5, {}).total_ms == 3.75


def test_readme_table_is_the_one_the_code_prints():
    from specbench.step_costs import published_table

    assert published_table() in (ROOT / "README.md").read_text()


def test_eagle3_head_is_its_shapes_summed_and_cheap_beside_the_target():
    head = MODELS["EAGLE-3-Llama-3.1-8B"]
    hidden, kv, mlp = 4096, 1024, 14336
    attention = 2 * hidden * hidden + 2 * (2 * hidden * kv) + hidden * hidden
    assert head.params == attention + 3 * hidden * mlp + 3 * hidden * hidden + hidden * 32000
    model = roofline(MODELS["Llama-3.1-8B"], "H100", draft=head, context_length=2048)
    step = model.step(1, 3)
    assert step.sources["draft"] == "modelled"
    assert 0.1 < step.draft_ms / step.target_ms < 0.25  # three head forwards against one target forward


def test_numpy_integers_and_the_largest_k_a_file_covers(tmp_path):
    numpy = pytest.importorskip("numpy")
    costs = load_cost_file(EXAMPLE_CSV)
    assert costs.step(numpy.int64(1), numpy.int32(2)).target_ms == pytest.approx(15.64)
    with pytest.raises(SpecbenchError, match="must be a positive integer"):
        costs.step(1.5, 1)
    assert costs.max_spec_tokens(1) == 7 and costs.max_spec_tokens(2) is None
    narrow = load_cost_file(write(tmp_path, "batch,tokens,ms\n4,4,1\n4,12,2\n4,20,3\n"))
    assert narrow.max_spec_tokens(4) == 4  # 20 tokens at B = 4: K up to 4


def test_module_imports_without_torch():
    import subprocess
    import sys

    code = "import sys, specbench.step_costs; sys.exit('torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, check=False).returncode == 0
