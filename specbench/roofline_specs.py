"""What the roofline of ``specbench.step_costs`` reads: GPU specs (``GPUS``) and model specs (``MODELS``),
each number with where it was read, and ``resolve_gpu``, which finds a GPU by a loosely spelled name.
This module imports no torch."""

from __future__ import annotations

from dataclasses import dataclass

from specbench.errors import SpecbenchError


@dataclass(frozen=True)
class GpuSpec:
    """Peak numbers of one accelerator, each with where it was read."""

    name: str
    bandwidth: float  # peak memory bandwidth, bytes/s
    flops: float | None  # dense bf16/fp16 tensor FLOP/s (no sparsity); None where none is published
    memory_bytes: float
    source: str


GPUS: dict[str, GpuSpec] = {
    "H100": GpuSpec(
        "H100 SXM5", 3.35e12, 989.4e12, 80e9,
        "NVIDIA H100 SXM datasheet: 3.35 TB/s HBM3, BF16 tensor 1,979 TFLOPS with 2:4 sparsity (989.4 dense), "
        "80 GB; dense table at glennklockwood.com/garden/processors/h100"),
    "H200": GpuSpec(
        "H200 SXM", 4.8e12, 989.4e12, 141e9,
        "NVIDIA H200 datasheet: 141 GB HBM3e at 4.8 TB/s, same GH100 compute as H100 SXM (BF16 1,979 TFLOPS "
        "with sparsity, 989 dense; itkb.uw.cz/2026/06/nvidia-h200-vs-b300-precisions-cores.html)"),
    "B200": GpuSpec(
        "B200 (HGX, 1000 W)", 8e12, 2250e12, 192e9,
        "glennklockwood.com/garden/processors/B200: 192 GB HBM3e, 8 TB/s; HGX B200 at 1,000 W BF16 matrix "
        "2,250 TFLOPS dense (4,500 sparse)"),
    "MI300X": GpuSpec(
        "AMD Instinct MI300X", 5.3e12, 1307.4e12, 192e9,
        "AMD Instinct MI300X specifications: 192 GB HBM3, 5.3 TB/s, peak BF16 1,307.4 TFLOPS dense (2,614.9 with "
        "structured sparsity)"),
    "M5-Max": GpuSpec(
        "Apple M5 Max (40-core GPU)", 614e9, None, 128e9,
        "Apple M5 Max, announced 2026-03-03: 614 GB/s unified memory bandwidth, up to 128 GB "
        "(awesomeagents.ai/hardware/apple-m5-max); no peak GPU FLOP/s published, so no compute bound"),
}


@dataclass(frozen=True)
class ModelSpec:
    """What the roofline needs of a model. Parameter counts are counts, not bytes."""

    name: str
    params: float  # every parameter (all experts)
    bytes_per_weight: float  # 2 for bf16; include quantization scales
    active_params: float | None = None  # per token, for a mixture of experts; None: dense (= params)
    num_experts: int = 0  # routed experts per MoE layer
    experts_per_token: int = 0
    embedding_params: float = 0.0  # the input embedding table of an untied model: gathered, not read whole
    attention_layers: int | None = None  # layers with a KV cache; None: not known (KV and attention left out)
    query_heads: int = 0
    kv_heads: int = 0
    head_dim: int = 0
    kv_bytes_per_element: float = 2.0
    vocab_size: int | None = None
    source: str = ""

    def __post_init__(self) -> None:
        if self.params <= 0 or self.bytes_per_weight <= 0:
            raise SpecbenchError(f"model {self.name}: params and bytes_per_weight must be positive")
        active = self.active
        if active > self.params:
            raise SpecbenchError(f"model {self.name}: active params {active:g} exceed its params {self.params:g}")
        if self.is_moe and (self.experts_per_token < 1 or self.num_experts <= self.experts_per_token):
            raise SpecbenchError(f"model {self.name}: a mixture of experts needs num_experts > experts_per_token "
                                     f">= 1")

    @property
    def active(self) -> float:
        return self.params if self.active_params is None else self.active_params

    @property
    def is_moe(self) -> bool:
        return self.active < self.params

    @property
    def kv_bytes_per_token(self) -> float:
        if self.attention_layers is None:
            return 0.0
        return 2 * self.attention_layers * self.kv_heads * self.head_dim * self.kv_bytes_per_element

    def expert_params(self) -> float:
        """Parameters of one routed expert summed over its layers ((total - active) / (E - k))."""
        return (self.params - self.active) / (self.num_experts - self.experts_per_token) if self.is_moe else 0.0

    def params_read(self, tokens: int) -> float:
        """Parameters read by one forward over ``tokens`` tokens (embedding table excluded)."""
        if not self.is_moe:
            return self.params - self.embedding_params
        expert = self.expert_params()
        dense = self.active - self.experts_per_token * expert
        touched = self.num_experts * (1 - (1 - self.experts_per_token / self.num_experts) ** tokens)
        return dense + touched * expert - self.embedding_params


_LLAMA31_CARD = "meta-llama/Llama-3.1-8B model card and config.json"
MODELS: dict[str, ModelSpec] = {
    "Llama-3.1-8B": ModelSpec(
        "Llama-3.1-8B", 8.03e9, 2.0, embedding_params=128256 * 4096, attention_layers=32, query_heads=32,
        kv_heads=8, head_dim=128, vocab_size=128256,
        source=f"{_LLAMA31_CARD}: 8.03B params, 32 layers, 32 query / 8 KV heads of 128, hidden 4096, vocab 128256, "
               f"untied embeddings; bf16"),
    "Llama-3.1-70B": ModelSpec(
        "Llama-3.1-70B", 70.6e9, 2.0, embedding_params=128256 * 8192, attention_layers=80, query_heads=64,
        kv_heads=8, head_dim=128, vocab_size=128256,
        source="meta-llama/Llama-3.1-70B model card and config.json: 70.6B params, 80 layers, 64 query / 8 KV heads "
               "of 128, hidden 8192, vocab 128256, untied embeddings; bf16"),
    "Qwen3-8B": ModelSpec(
        "Qwen3-8B", 8.2e9, 2.0, embedding_params=151936 * 4096, attention_layers=36, query_heads=32, kv_heads=8,
        head_dim=128, vocab_size=151936,
        source="Qwen/Qwen3-8B model card: 8.2B params, 36 layers, 32 query / 8 KV heads; config.json: head_dim 128, "
               "hidden 4096, vocab 151936, tie_word_embeddings false; bf16"),
    "Qwen3-32B": ModelSpec(
        "Qwen3-32B", 32.8e9, 2.0, embedding_params=151936 * 5120, attention_layers=64, query_heads=64, kv_heads=8,
        head_dim=128, vocab_size=151936,
        source="Qwen/Qwen3-32B model card: 32.8B params, 64 layers, 64 query / 8 KV heads; config.json: head_dim "
               "128, hidden 5120, vocab 151936, untied; bf16"),
    "Qwen3-30B-A3B": ModelSpec(
        "Qwen3-30B-A3B", 30.5e9, 2.0, active_params=3.3e9, num_experts=128, experts_per_token=8,
        embedding_params=151936 * 2048, attention_layers=48, query_heads=32, kv_heads=4, head_dim=128,
        vocab_size=151936,
        source="Qwen/Qwen3-30B-A3B model card: 30.5B params, 3.3B activated, 48 layers, 32 query / 4 KV heads, "
               "128 experts, 8 activated; config: head_dim 128, hidden 2048, vocab 151936, untied; bf16"),
    # one decoder layer whose attention takes the concatenated embedding and hidden state (2 x 4096 in),
    # the fc that fuses three target layers (3 x 4096 -> 4096) and a 32,000-token head; the input
    # embedding is the target's (shared, gathered): 8192*4096 + 2*8192*1024 + 4096*4096 (attention)
    # + 3*4096*14336 (MLP) + 12288*4096 (fc) + 4096*32000 (head) = 424,673,280
    "EAGLE-3-Llama-3.1-8B": ModelSpec(
        "EAGLE-3 head for Llama-3.1-8B", 424_673_280, 2.0, attention_layers=1, query_heads=32, kv_heads=8,
        head_dim=128, vocab_size=32000,
        source="derived from the shapes in SpecForge configs/llama3-8B-eagle3.json (1 layer, hidden 4096, "
               "intermediate 14336, 32 query / 8 KV heads, draft_vocab_size 32000), with EAGLE-3's attention reading "
               "2 x hidden and its fc 3 x hidden; a sum of shapes, not a published parameter count; bf16"),
    "Nemotron-3.5-Lightning-30B-A3B-6bit": ModelSpec(
        "Nemotron-3.5-Lightning-30B-A3B (MLX 6-bit)", 30e9, 6.5 / 8, active_params=3e9, num_experts=128,
        experts_per_token=6, attention_layers=None,
        source="NVIDIA Megatron-Bridge and NeMo docs: 30B total, ~3B active, 128 routed experts with 6 activated "
               "(hybrid Mamba-2/MoE/attention); weights 6-bit in MLX groups of 64 with a 16-bit scale and bias "
               "(6.5 bits a weight); the number of attention layers is not given there, so its KV cache and "
               "attention FLOPs are left out, as are the Mamba state and the layers kept in higher precision"),
}


def resolve_gpu(gpu: str | GpuSpec) -> GpuSpec:
    if isinstance(gpu, GpuSpec):
        return gpu
    key = "".join(ch for ch in gpu.lower() if ch.isalnum())
    for name, spec in GPUS.items():
        if "".join(ch for ch in name.lower() if ch.isalnum()) == key:
            return spec
    raise SpecbenchError(f"unknown GPU {gpu!r}; known GPUs: {', '.join(GPUS)}")
