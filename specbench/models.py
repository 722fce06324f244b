"""Named model presets: the vocabulary sizes of real models, so benchmarks run at real shapes.

The vocabulary size ``V`` is the width of the logits the verification step reads (the model's
``vocab_size`` in its config, which can be larger than the tokenizer's count of tokens).
"""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class ModelPreset:
    """A model family by name, with the vocabulary size of its logits."""

    name: str
    vocab_size: int
    description: str


PRESETS: tuple[ModelPreset, ...] = (
    ModelPreset("llama3", 128256, "Llama-3 / 3.1 / 3.3"),
    ModelPreset("qwen3", 151936, "Qwen3"),
    ModelPreset("deepseek-v3", 129280, "DeepSeek-V3 / R1"),
    ModelPreset("gemma3", 262144, "Gemma-3"),
    ModelPreset("gpt-oss", 201088, "gpt-oss (o200k_harmony)"),
    ModelPreset("mistral", 131072, "Mistral (Tekken tokenizer)"),
)


def _normalise(name: str) -> str:
    # "Llama-3", "llama_3" and "LLAMA3" all name the same preset
    return "".join(ch for ch in name.lower() if ch.isalnum())


_BY_KEY = {_normalise(preset.name): preset for preset in PRESETS}


def resolve_model(name: str) -> ModelPreset:
    """The preset called ``name`` (case, ``-``, ``_`` and ``.`` ignored); unknown names are a usage error."""
    preset = _BY_KEY.get(_normalise(name))
    if preset is None:
        known = ", ".join(p.name for p in PRESETS)
        raise SpecbenchError(f"unknown model {name!r}; known models: {known}")
    return preset
