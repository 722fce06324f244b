"""Adapters for the samplers of other projects, imported only when used (a missing package is a
one-line note, never a traceback).

- ``flashinfer``: ``flashinfer.sampling.chain_speculative_sampling`` (FlashInfer 0.6): target and
  draft probabilities in, ``[B, K + 1]`` int32 tokens with ``-1`` padding out, plus the number of
  draft tokens emitted. It has no count of drafts per request (no ragged batches) and reads the
  draft id's row unchecked (no ``-1`` drafts). Each request gets its own Philox seed (``seeds``)
  and offset (from ``positions``), both device tensors, so calls can be captured in a CUDA graph.
- ``flashinfer-truncated``: the same sampler after FlashInfer's own truncation, as SGLang runs it:
  ``flashinfer.sampling.top_k_renorm_probs`` then ``top_p_renorm_probs`` on the target
  probabilities (flattened to ``[B * (K + 1), V]``, each request's ``top_k`` (int32, off as ``V``)
  and ``top_p`` (float32) repeated over its rows; a knob not given is not applied), then
  ``chain_speculative_sampling`` as above. Draft probabilities are taken as given (the harness
  truncates converted draft logits, ``contract.convert``). FlashInfer has no min-p
  renormalisation, so a case with any ``min_p`` is declined (a skipped row), never run without it.
  Known differences from specbench's contract, which ``specbench verify`` flags on inputs with
  ties: FlashInfer's top-k keeps every token tied with the k-th value (specbench keeps exactly
  ``k``, the lowest ids), and its top-p keeps every token tied with the boundary value (specbench
  cuts between ties by id). Renormalising probabilities, it also cannot tell a greedy row (one-hot
  after conversion) from a sampled one, which is harmless: top-k/top-p keep a one-hot row as is.
- ``vllm``: vLLM V1's ``vllm.v1.sample.rejection_sampler.rejection_sample`` (the signature of
  ``rejection_sample(draft_token_ids, num_draft_tokens, max_spec_len, cu_num_draft_tokens,
  draft_probs, target_probs, bonus_token_ids, sampling_metadata)``): requests flattened to
  ``[num_tokens, V]``, counts and greedy flags read on the host as vLLM's scheduler has them,
  and the bonus token drawn by the caller (here, in the timed call, from the bonus row with
  torch's generator). It takes ``draft_probs=None`` for one-hot (n-gram) drafts.
- ``vllm-mrv2``: vLLM Model Runner V2's ``rejection_sample`` (vLLM 0.33,
  ``vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py``), the token rule or, with
  ``use_block_verification=True``, block verification: target logits already divided by the temperature,
  flattened to ``[num_logits, V]`` (each request's ``n + 1`` rows, ``cu_num_logits`` their starts), draft
  logits ``[B, K, V]`` before the temperature (the kernel divides them; ``None`` for one-hot drafts), the
  drafts flattened beside the rows (request r's draft i at ``cu_num_logits[r] + i + 1``), each row's token
  position, request and step, and each request's temperature and seed (its own random streams, from the
  seed and the positions). It returns ``[B, K + 1]`` int64 tokens (unwritten past the emitted ones, padded
  here with ``-1``) and the number emitted. Not run against vLLM here (its import pulls in vLLM's
  platform and config layers, and vLLM is not on the GPU image): the tests run it against a stand-in
  written to that signature.
- ``sglang``: SGLang's Triton chain verifier ``chain_speculative_sampling_triton`` (SGLang 0.5.23,
  ``sglang/kernels/ops/speculative/reject_sampling.py``), the token rule or, with
  ``block_verification=True``, block verification (Sun et al. 2024): target probabilities ``[B, K + 1, V]``
  and draft probabilities ``[B, K, V]`` in, the root token and the drafts as ``candidates`` ``[B, K + 1]``,
  each slot's place in a flat output (``retrive_index``), and the uniforms as tensors (``[B, K + 1]`` for
  the tests, ``[B]`` for the final token, drawn here with ``torch.rand`` on the device's generator as
  SGLang's server draws them each step: not seeded per request, and a CUDA graph can hold the step). It writes the accepted drafts and the final token into the
  flat ``predicts`` (int32) and the number accepted into ``accept_token_num``. Every request has K drafts
  (no ragged batches) and its ids are read unchecked. The final token is drawn by inverse CDF (the last id
  when the residual has no mass), and a draft whose q is not in ``(0, 1]`` is rejected. The kernel file
  imports only Triton, so it is loaded from the installed package by path: importing ``sglang`` itself
  would pull in its server's dependencies.
- ``sglang-tree``: SGLang's greedy tree verification as its server runs it (SGLang 0.5.23,
  ``eagle_utils.py``): ``torch.argmax`` over every target row (ties to the lowest id), then its Triton tree
  walker ``verify_tree_greedy_kernel_triton`` (``sglang/kernels/ops/speculative/spec_tree.py``; SGLang runs
  this walker on XPU and a CUDA one of the same contract on NVIDIA GPUs, JIT-built through apache-tvm-ffi,
  which needs its server's packages). SGLang's tree layout (``specbench/trees.py``, ``from_sglang``): node 0
  the root and node ``j + 1`` this layout's node ``j``; ``candidates`` ``[B, N + 1]``; a first-child list and
  a next-sibling list in increasing node order (this layout's child ranks), only a request's first
  ``num_draft_tokens`` nodes linked; ``retrive_index`` ``b * (N + 1) + m``, the rows of the flat target. The
  lists are built once when the call is prepared, as SGLang's drafting step builds them before verification;
  the timed step is the argmax, the walk and reading the path back (``predicts`` at ``accept_index``). The
  walk takes the first sibling in list order whose token is the target's argmax, as the greedy rule here
  does; a draft id of ``-1`` or outside ``[0, V)`` never matches. The greedy mode only. The argmax is of the
  raw row, so it parts from specbench's cleaning of rows (``specbench/verification.py``) where a row holds a
  NaN (SGLang's argmax picks it; the contract reads it as ``-inf``), ``+inf`` beside the float32 maximum (the
  contract cleans ``+inf`` to that maximum, so the lower id wins), or no finite value (all ``-inf``: an
  invalid row that stops the request in the contract, token 0 for SGLang, whose walk goes on), and, for target
  probabilities, rows with no positive entry (invalid in the contract) or entries above 1 (the contract clamps
  them to 1, so the lowest id among them wins). The walker's function is compiled from its file's source alone
  (under the file's name and lines, where Triton reads its source back): the module's own imports pull in
  SGLang's server.
- ``sglang-tree-cuda``: the same with SGLang's CUDA tree walker ``verify_tree_greedy``
  (``sglang/kernels/jit/csrc/speculative/tree.cuh``), the one its server runs on NVIDIA GPUs, built from the
  installed SGLang's headers through apache-tvm-ffi by ``sglang_jit.py`` (``target_predict`` passed as
  ``[B, N + 1]``). Needs a CUDA GPU, SGLang's sources and apache-tvm-ffi.
- ``sglang-tree-target-only``: SGLang's probabilistic tree verification as its server runs it on NVIDIA GPUs
  without a draft distribution (``eagle_utils.py``, no rejection sampling): target probabilities (target
  logits softmaxed at each request's temperature by specbench's conversion, ``contract.logits_to_probs``;
  probabilities as given), draft rows of zeros, coins from ``torch.rand`` on the device (``[B, N + 1]`` and
  ``[B]``: not seeded per request), then ``tree_speculative_sampling_target_only`` (``sampling.cuh``, built by
  ``sglang_jit.py``; thresholds 1, deterministic) over the same lists. Its rule, read from the kernel: one coin
  a node, and its children's target probabilities added up in turn until the sum passes the coin, no draft
  distribution read; a token repeated among siblings is counted once for each, so siblings drawn with repeats
  (independent draws, or other rules than distinct one-hot candidates) need not give the target's law; distinct
  one-hot candidates do. Draft ids of linked nodes must lie in ``[0, V)`` (the kernel reads and writes rows at
  them unchecked: refused), and ``B (N + 1) V < 2^32`` (its 32-bit offsets). Needs a CUDA GPU, SGLang's
  sources, apache-tvm-ffi and FlashInfer's headers.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import NamedTuple

import torch

from specbench import trees
from specbench.errors import SpecbenchError
from specbench.implementations import sglang_jit
from specbench.implementations.contract import Implementation, sampler
from specbench.verification import VerifyResult, prepare_verify


def _missing(module: str, package: str, project: str):
    def unavailable(device: torch.device) -> str | None:
        if importlib.util.find_spec(module) is None:
            return f"{project} is not installed (pip install {package})"
        return None

    return unavailable


@sampler(name="flashinfer", description="FlashInfer chain_speculative_sampling (probabilities in)",
         modes=["probabilistic"], target="probs", draft="probs", rng="own", seeded=True, ragged=False,
         invalid_drafts=False, cuda_graph=True, devices=["cuda"])
def flashinfer(*, target_probs, draft_probs, draft_token_ids, seeds, positions, **_) -> VerifyResult:
    from flashinfer.sampling import chain_speculative_sampling

    num_rows = target_probs.shape[1]
    tokens, _independent, emitted = chain_speculative_sampling(
        draft_probs, draft_token_ids.to(torch.int32), target_probs, deterministic=True,
        seed=seeds, offset=positions * num_rows)
    num_accepted = emitted.to(torch.int32)
    return VerifyResult(tokens.to(torch.int64), num_accepted + 1, num_accepted)


@sampler(name="flashinfer-truncated", description="FlashInfer top_k_renorm_probs, top_p_renorm_probs, then "
         "chain_speculative_sampling (probabilities in; no min_p)", modes=["probabilistic"], target="probs",
         draft="probs", rng="own", seeded=True, ragged=False, invalid_drafts=False, cuda_graph=True, truncation=True,
         devices=["cuda"])
def flashinfer_truncated(*, target_probs, draft_probs, draft_token_ids, seeds, positions, top_k=None, top_p=None,
                         min_p=None, **_) -> VerifyResult:
    from flashinfer.sampling import chain_speculative_sampling, top_k_renorm_probs, top_p_renorm_probs

    if min_p is not None and bool((min_p > 0).any()):  # read once, before timing: the harness calls it untimed first
        raise SpecbenchError("flashinfer-truncated declines min_p: FlashInfer has no min-p renormalisation to apply "
                             "before chain_speculative_sampling")
    batch, num_rows, vocab = target_probs.shape
    rows = target_probs.reshape(batch * num_rows, vocab)
    if top_k is not None:  # specbench's 0 (off) is V for FlashInfer, which keeps every token then
        per_row = torch.where(top_k > 0, top_k, vocab).clamp(max=vocab).to(torch.int32)
        rows = top_k_renorm_probs(rows, per_row.repeat_interleave(num_rows))
    if top_p is not None:
        rows = top_p_renorm_probs(rows, top_p.to(torch.float32).repeat_interleave(num_rows))
    tokens, _independent, emitted = chain_speculative_sampling(
        draft_probs, draft_token_ids.to(torch.int32), rows.reshape(batch, num_rows, vocab), deterministic=True,
        seed=seeds, offset=positions * num_rows)
    num_accepted = emitted.to(torch.int32)
    return VerifyResult(tokens.to(torch.int64), num_accepted + 1, num_accepted)


@sampler(name="vllm", description="vLLM V1 rejection_sample (probabilities in, bonus drawn by the caller)",
         modes=["greedy", "probabilistic"], target="probs", draft="probs", one_hot=True, rng="own",
         invalid_drafts=False, devices=["cuda"])
def vllm(*, target_probs, draft_token_ids, num_draft_tokens, temperatures, draft_probs=None, **_) -> VerifyResult:
    from types import SimpleNamespace

    from vllm.v1.sample import rejection_sampler

    batch, num_rows, _ = target_probs.shape
    device = target_probs.device
    counts = num_draft_tokens.to(torch.int64)
    in_request = torch.arange(num_rows - 1, device=device)[None, :] < counts[:, None]  # [B, K]
    greedy = temperatures == 0
    # the bonus row of each request (row n_b): argmax for a greedy request, else a draw from p
    bonus_probs = target_probs[torch.arange(batch, device=device), counts].float()
    drawn = torch.multinomial(bonus_probs.clamp_min(0), 1)[:, 0]
    bonus = torch.where(greedy, bonus_probs.argmax(dim=-1), drawn)
    greedy_value = getattr(rejection_sampler, "GREEDY_TEMPERATURE", -1)
    metadata = SimpleNamespace(
        all_greedy=bool(greedy.all()), all_random=not bool(greedy.any()), generators={},
        temperature=torch.where(greedy, float(greedy_value), temperatures), top_k=None, top_p=None)
    output = rejection_sampler.rejection_sample(
        draft_token_ids[in_request].contiguous(), counts.tolist(), num_rows - 1,
        torch.cumsum(counts, 0).to(torch.int32),
        None if draft_probs is None else draft_probs[in_request].contiguous(),
        target_probs[:, :-1][in_request].contiguous(), bonus[:, None].contiguous(), metadata)
    output = output.to(torch.int64)
    num_emitted = (output != -1).to(torch.int32).cumprod(dim=1).sum(dim=1, dtype=torch.int32)
    return VerifyResult(output, num_emitted, num_emitted - 1)


@sampler(name="vllm-mrv2", description="vLLM Model Runner V2 rejection_sample (logits in; token and block rules)",
         modes=["greedy", "probabilistic"], target="logits", draft="logits", one_hot=True, rng="own", seeded=True,
         invalid_drafts=False, methods=("token", "block"), devices=["cuda"])
def vllm_mrv2(*, target_logits, draft_token_ids, num_draft_tokens, temperatures, seeds, positions, draft_logits=None,
              method="token", **_) -> VerifyResult:
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import rejection_sample

    batch, num_slots, _ = target_logits.shape
    device = target_logits.device
    steps = torch.arange(num_slots, device=device)
    in_request = steps[None, :] <= num_draft_tokens.to(torch.int64)[:, None]  # each request's n + 1 rows
    tempered = target_logits / torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    cu_num_logits = torch.zeros(batch + 1, dtype=torch.int32, device=device)
    cu_num_logits[1:] = torch.cumsum(in_request.sum(dim=1), 0)
    before = torch.full((batch, 1), -1, dtype=torch.int64, device=device)  # the slot before the drafts: unread
    requests = torch.arange(batch, dtype=torch.int32, device=device)
    sampled, num_sampled = rejection_sample(
        tempered[in_request].contiguous(), None if draft_logits is None else draft_logits.contiguous(),
        torch.cat([before, draft_token_ids.to(torch.int64)], dim=1)[in_request].contiguous(), cu_num_logits,
        (positions.to(torch.int64)[:, None] + steps[None, :])[in_request].contiguous(), requests,
        requests[:, None].expand(batch, num_slots)[in_request].contiguous(),
        steps.to(torch.int32)[None, :].expand(batch, num_slots)[in_request].contiguous(),
        temperatures.to(torch.float32).contiguous(), seeds.to(torch.int64).contiguous(), num_slots - 1,
        use_block_verification=method == "block")
    num_emitted = num_sampled.to(torch.int32)
    tokens = torch.where(steps[None, :] < num_emitted[:, None], sampled, -1)
    return VerifyResult(tokens, num_emitted, num_emitted - 1)


def _sglang_cuda_unavailable(device: torch.device) -> str | None:
    # SGLang's CUDA kernels need SGLang's sources and apache-tvm-ffi to be built
    missing = _missing("sglang", "sglang", "SGLang")(device)
    return missing or _missing("tvm_ffi", '"apache-tvm-ffi[cpp]"', "apache-tvm-ffi")(device)


def _sglang_sampling_unavailable(device: torch.device) -> str | None:
    # SGLang's tree sampling kernel also includes FlashInfer's headers
    return _sglang_cuda_unavailable(device) or _missing("flashinfer", "flashinfer-python", "FlashInfer")(device)


def _sglang_file(name: str, holds: str) -> Path:
    # a file of SGLang's speculative kernels, found without running the package
    path = sglang_jit.sglang_dir() / "kernels" / "ops" / "speculative" / name
    if not path.is_file():
        raise SpecbenchError(f"this SGLang has no {name} where 0.5.23 keeps {holds} ({path})")
    return path


@functools.cache
def _sglang_verifier():
    # SGLang's chain verifier, from its kernel file alone
    path = _sglang_file("reject_sampling.py", "its Triton chain verifier")
    spec = importlib.util.spec_from_file_location("specbench_sglang_reject_sampling", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.chain_speculative_sampling_triton


_SGLANG_TREE_WALKER = "verify_tree_greedy_kernel_triton"


@functools.cache
def _sglang_tree_walker():
    # SGLang's Triton greedy tree walker: its function alone, compiled under the file's name at its own lines
    # (Triton's JIT reads a kernel's source back from there), so the module's imports never run
    import triton
    import triton.language as tl

    path = _sglang_file("spec_tree.py", "its Triton greedy tree walker")
    source = path.read_text()
    found = [node for node in ast.parse(source).body
             if isinstance(node, ast.FunctionDef) and node.name == _SGLANG_TREE_WALKER]
    if not found:
        raise SpecbenchError(f"{path} has no function {_SGLANG_TREE_WALKER} (SGLang 0.5.23's greedy tree walker)")
    node = found[0]
    first = min([node.lineno, *(decorator.lineno for decorator in node.decorator_list)])
    lines = source.splitlines()[first - 1:node.end_lineno]
    namespace = {"triton": triton, "tl": tl}
    try:
        # (the source is SGLang's installed kernel file, which its own import would run too)
        exec(compile("\n" * (first - 1) + "\n".join(lines) + "\n", str(path), "exec"), namespace)  # noqa: S102
    except Exception as error:  # a later SGLang's walker may lean on more of its module
        raise SpecbenchError(f"SGLang's {_SGLANG_TREE_WALKER} in {path} does not load alone: "
                             f"{type(error).__name__}: {error}") from error
    return namespace[_SGLANG_TREE_WALKER]


class _SGLangLayout(NamedTuple):
    """A prepared call in SGLang's layout: its lists on the call's device (``trees.to_sglang``), the
    ``accept_index`` columns (``slots``: the root and the deepest path's nodes), each request's first flat row
    (``requests``, ``[B, 1]``), and whether the call was a tree (else a chain: no ``accepted_nodes``)."""

    lists: dict[str, torch.Tensor]
    slots: int
    requests: torch.Tensor
    tree: bool

    def buffers(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SGLang's outputs, fresh as its server allocates them each step: ``predicts`` ``[B * M]``,
        ``accept_index`` ``[B, slots]`` (-1) and ``accept_token_num`` ``[B]``, int32."""
        batch, width = self.lists["candidates"].shape
        device = self.requests.device
        return (torch.zeros(batch * width, dtype=torch.int32, device=device),
                torch.full((batch, self.slots), -1, dtype=torch.int32, device=device),
                torch.empty((batch,), dtype=torch.int32, device=device))

    def result(self, predicts: torch.Tensor, accept_index: torch.Tensor, accepted: torch.Tensor) -> VerifyResult:
        """SGLang's accepted path (the rows of the root and each accepted node in ``accept_index``, its tokens in
        ``predicts`` there) as this layout's result."""
        batch, width = self.lists["candidates"].shape
        device = predicts.device
        on_path = torch.arange(self.slots, device=device)[None, :] <= accepted[:, None]
        path = accept_index.to(torch.int64).clamp(min=0)
        tokens = torch.full((batch, width), -1, dtype=torch.int64, device=device)
        tokens[:, :self.slots] = torch.where(on_path, predicts.to(torch.int64)[path], -1)
        nodes = torch.full((batch, width - 1), -1, dtype=torch.int32, device=device)
        nodes[:, :self.slots - 1] = torch.where(on_path[:, 1:], path[:, 1:] - self.requests - 1, -1).to(torch.int32)
        return VerifyResult(tokens, accepted + 1, accepted, accepted_nodes=nodes if self.tree else None)


def _sglang_layout(checked: dict, device: torch.device) -> _SGLangLayout:
    # a checked call's trees (a chain's, when it gives none) in SGLang's layout, once, on the CPU, then on `device`
    draft_token_ids = checked["draft_token_ids"]
    batch, num_nodes = draft_token_ids.shape
    parents = checked.get("tree_parents")
    if parents is None:
        parents = trees.batched(trees.chain(num_nodes), batch).parents
    lists = trees.to_sglang(parents.cpu(), draft_token_ids.cpu(), checked["num_draft_tokens"].cpu())
    slots = int(lists.pop("depth")) + 1
    requests = torch.arange(batch, device=device)[:, None] * (num_nodes + 1)
    return _SGLangLayout({name: tensor.to(device) for name, tensor in lists.items()}, slots, requests,
                         checked.get("tree_parents") is not None)


def _sglang_tree(kwargs: dict, walker: str = "triton") -> Callable[[], VerifyResult]:
    # prepare (``sglang-tree``: the Triton walker; ``sglang-tree-cuda``: the CUDA one): the public checks and
    # SGLang's lists, once; the step: argmax, walk, the path read back
    _, checked = prepare_verify(**kwargs, backend="torch")
    if checked["mode"] != "greedy":
        raise SpecbenchError(f"SGLang's tree walkers verify greedily only (they compare drafts with the argmax), "
                             f"got mode {checked['mode']!r}")
    target = checked["target_logits"] if checked["target_logits"] is not None else checked["target_probs"]
    layout = _sglang_layout(checked, target.device)
    lists = layout.lists
    batch, width = lists["candidates"].shape
    if walker == "cuda":
        walk_cuda = sglang_jit.tree_walker()
    else:
        walk_triton = _sglang_tree_walker()
    rows = target.reshape(batch * width, target.shape[-1])

    def step() -> VerifyResult:
        target_predict = torch.argmax(rows, dim=-1)
        predicts, accept_index, accepted = layout.buffers()
        if walker == "cuda":  # (its target_predict [B, M], as SGLang's server reshapes it)
            walk_cuda(predicts, accept_index, accepted, lists["candidates"], lists["retrive_index"],
                      lists["retrive_next_token"], lists["retrive_next_sibling"], target_predict.view(batch, width))
        else:
            walk_triton[(batch,)](predicts, accept_index, accepted, lists["candidates"], lists["retrive_index"],
                                  lists["retrive_next_token"], lists["retrive_next_sibling"], target_predict,
                                  batch_size=batch, num_speculative_tokens=layout.slots, num_draft_tokens=width)
        return layout.result(predicts, accept_index, accepted)

    return step


def _sglang_tree_target_only(kwargs: dict) -> Callable[[], VerifyResult]:
    # prepare: the checks, SGLang's lists and its kernel, once; the step: as SGLang's server runs it without a
    # draft distribution (probabilities, zero draft rows, torch.rand coins, the kernel, the path read back)
    from specbench.implementations.contract import logits_to_probs

    _, checked = prepare_verify(**kwargs, backend="torch")
    if checked["mode"] != "probabilistic":
        raise SpecbenchError(f"sglang-tree-target-only samples (the probabilistic mode) only, got mode "
                             f"{checked['mode']!r}")
    logits, probs, temperatures = checked["target_logits"], checked["target_probs"], checked["temperatures"]
    vocab = (logits if logits is not None else probs).shape[-1]
    device = checked["draft_token_ids"].device
    layout = _sglang_layout(checked, device)
    lists = layout.lists
    batch, width = lists["candidates"].shape
    # (the kernel reads and writes the rows at each tested node's id unchecked, and indexes them in 32 bits)
    linked = torch.zeros_like(lists["candidates"], dtype=torch.bool)  # (the nodes some list reaches)
    for links in (lists["retrive_next_token"], lists["retrive_next_sibling"]):
        request, node = (links >= 0).nonzero(as_tuple=True)
        linked[request, links[request, node]] = True
    ids = lists["candidates"][linked]
    if bool(((ids < 0) | (ids >= vocab)).any()):
        raise SpecbenchError(f"sglang-tree-target-only takes draft ids in [0, {vocab}) only: SGLang's sampler reads "
                             f"the target's row at each draft id unchecked")
    if batch * width * vocab >= 2 ** 32:
        raise SpecbenchError(f"sglang-tree-target-only takes fewer than 2^32 target entries ({batch} x {width} x "
                             f"{vocab} here): SGLang's sampler indexes them in 32 bits")
    sample = sglang_jit.tree_sampler(math.gcd(4, vocab))
    greedy = temperatures == 0
    greedy_rows = bool(greedy.any())

    def step() -> VerifyResult:
        if logits is not None:
            target = logits_to_probs(logits, temperatures, greedy_rows).contiguous()
        else:  # (a temperature-0 request is greedy whatever the form: its rows one-hot at their argmax)
            target = probs.to(torch.float32).contiguous()
            if greedy_rows:
                one_hot = torch.zeros_like(target).scatter_(-1, target.argmax(dim=-1, keepdim=True), 1.0)
                target = torch.where(greedy[:, None, None], one_hot, target)
        predicts, accept_index, accepted = layout.buffers()
        sample(predicts, accept_index, accepted, lists["candidates"], lists["retrive_index"],
               lists["retrive_next_token"], lists["retrive_next_sibling"],
               torch.rand((batch, width), device=device), torch.rand((batch,), device=device), target,
               torch.zeros_like(target), 1.0, 1.0)
        return layout.result(predicts, accept_index, accepted)

    return step


@sampler(name="sglang", description="SGLang chain_speculative_sampling_triton (probabilities in; token and block "
         "rules)", modes=["probabilistic"], target="probs", draft="probs", one_hot=False, rng="own", seeded=False,
         ragged=False, invalid_drafts=False, cuda_graph=True, methods=("token", "block"))
def sglang(*, target_probs, draft_probs, draft_token_ids, method="token", **_) -> VerifyResult:
    verifier = _sglang_verifier()
    batch, num_slots, _ = target_probs.shape
    device = target_probs.device
    # the uniforms as SGLang's server draws them each step: torch.rand on the device's generator (no host
    # read, so a CUDA graph can hold the step; not seeded per request)
    uniforms = torch.rand((batch, num_slots), device=device)
    final_uniforms = torch.rand((batch,), device=device)
    root = torch.zeros((batch, 1), dtype=torch.int64, device=device)  # the last accepted token: never read
    candidates = torch.cat([root, draft_token_ids.to(torch.int64)], dim=1).contiguous()
    slots = torch.arange(batch * num_slots, dtype=torch.int64, device=device).reshape(batch, num_slots)
    local = torch.arange(num_slots, device=device)
    next_token = torch.where(local < num_slots - 1, local + 1, -1).expand(batch, num_slots).contiguous()  # unread
    predicts = torch.full((batch * num_slots,), -1, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, num_slots), -1, dtype=torch.int32, device=device)
    num_accepted = torch.empty((batch,), dtype=torch.int32, device=device)
    verifier(predicts, accept_index, num_accepted, candidates, slots, next_token, torch.full_like(slots, -1),
             uniforms, final_uniforms, target_probs.contiguous(), draft_probs.contiguous(), 1.0, 1.0, True,
             block_verification=method == "block")
    return VerifyResult(predicts.reshape(batch, num_slots).to(torch.int64), num_accepted + 1, num_accepted)


ADAPTERS: dict[str, Implementation] = {
    "flashinfer": replace(flashinfer, unavailable=_missing("flashinfer", "flashinfer-python", "FlashInfer")),
    "flashinfer-truncated": replace(flashinfer_truncated,
                                    unavailable=_missing("flashinfer", "flashinfer-python", "FlashInfer")),
    "vllm": replace(vllm, unavailable=_missing("vllm", "vllm", "vLLM")),
    "vllm-mrv2": replace(vllm_mrv2, unavailable=_missing("vllm", "vllm", "vLLM")),
    "sglang": replace(sglang, unavailable=_missing("sglang", "sglang", "SGLang"), needs_gpu=True),
    "sglang-tree": Implementation(
        "sglang-tree", "SGLang greedy tree verification: torch.argmax of every row, then its Triton tree walker "
        "verify_tree_greedy_kernel_triton", prepare=functools.partial(_sglang_tree, walker="triton"),
        modes=("greedy",), seeded=True, batch_invariant=True, cuda_graph=True, trees=True, needs_gpu=True,
        unavailable=_missing("sglang", "sglang", "SGLang"), source="specbench.implementations.adapters:_sglang_tree"),
    "sglang-tree-cuda": Implementation(
        "sglang-tree-cuda", "SGLang greedy tree verification as on NVIDIA GPUs: torch.argmax of every row, then its "
        "CUDA tree walker verify_tree_greedy (built through apache-tvm-ffi)",
        prepare=functools.partial(_sglang_tree, walker="cuda"), modes=("greedy",), seeded=True, batch_invariant=True,
        cuda_graph=True, trees=True, devices=("cuda",), unavailable=_sglang_cuda_unavailable,
        source="specbench.implementations.adapters:_sglang_tree"),
    "sglang-tree-target-only": Implementation(
        "sglang-tree-target-only", "SGLang tree sampling without a draft distribution as on NVIDIA GPUs: target "
        "probabilities, then its CUDA kernel tree_speculative_sampling_target_only (built through apache-tvm-ffi)",
        prepare=_sglang_tree_target_only, modes=("probabilistic",), invalid_drafts=False, cuda_graph=True,
        trees=True, devices=("cuda",), unavailable=_sglang_sampling_unavailable,
        source="specbench.implementations.adapters:_sglang_tree_target_only"),
}
