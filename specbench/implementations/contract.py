"""The plugin contract: what an implementation declares, and how the harness calls it.

An implementation is a callable plus a few facts about it (``Implementation``). A plugin writes
the callable and declares the facts with ``@sampler(...)``:

- ``modes``: the modes it runs (``greedy``, ``probabilistic``, ``synthetic``).
- ``target`` and ``draft``: the form it takes the target and draft distributions in, ``"logits"``
  or ``"probs"``. Logits are always taken before the temperature (the callee divides them by
  ``temperatures``), probabilities after it. Inputs in the other form are converted for it (see
  ``convert``): softmax of the logits at the request's temperature (a greedy row, temperature 0,
  becomes the one-hot at its argmax), or ``T * log p`` of the probabilities (``log p`` for a greedy
  row), whose division by ``T`` gives ``log p`` back. ``one_hot``: it takes ``draft_<form>=None``
  for drafts without a distribution; otherwise it is given the one-hot rows. Under truncation a
  converted target is never cut (a plugin declaring ``truncation`` cuts it itself, with the knobs
  it is given), but draft probabilities are taken as given, so draft logits converted for a plugin
  taking draft probabilities become the truncated ``q'`` (``truncated_draft_probs``) unless
  ``truncate_draft_logits=False``.
- ``rng``: ``"specbench"`` when it draws from ``specbench.rng``'s streams (its outputs must then
  equal the reference's), ``"own"`` when it has its own generator (it is judged statistically).
- ``seeded``: the same ``seeds`` give the same outputs; ``batch_invariant``: a request's outputs do
  not depend on the other requests in the batch; ``ragged``: it honours ``num_draft_tokens < K``;
  ``invalid_drafts``: it takes draft ids of ``-1`` or outside ``[0, V)`` (rejected without a test);
  ``cuda_graph``: its calls can be captured in a CUDA graph. ``truncation``: it takes each request's
  ``top_k``, ``top_p``, ``min_p`` and ``truncate_draft_logits`` and follows the truncation rules of
  ``specbench/verification.py`` (``truncation_methods``: with only these methods; every declared
  method by default); ``logprobs``: it takes ``logprobs`` and returns them. ``specbench verify``
  runs the checks of a fact only when it is declared.
- ``devices``: ``cpu``, ``cuda`` or both.
- ``methods``: the verification methods it implements (``specbench/methods.py``), ``("token",)`` by
  default. One that declares another is also called with ``method`` (the name of the rule to follow);
  ``specbench verify --method`` checks an implementation only in the methods it declares.
- ``trees``: it verifies draft trees (``specbench/verification.py``, "Trees"): a call on a tree also gets
  ``tree_parents`` ``[B, N]`` int64 and ``tree_candidates`` (``"independent"`` or ``"without_replacement"``),
  ``acceptance_rates`` is then the synthetic table, and its result carries ``accepted_nodes``. ``specbench
  verify --tree`` checks only implementations that declare it.

The callable is called with keyword arguments, the same names as ``specbench.verify``:
``mode``, ``target_logits`` or ``target_probs`` (the declared form, ``[B, K + 1, V]``),
``draft_token_ids`` ``[B, K]`` int64, ``draft_logits`` or ``draft_probs`` (the declared form,
``[B, K, V]``; present in the probabilistic mode only), ``num_draft_tokens`` ``[B]`` int32,
``temperatures`` ``[B]`` float32 (each request's own, whatever the forms: it tempers logits, target
and draft alike, and never probabilities; 0 is a greedy request), ``seeds`` ``[B]`` int64,
``positions`` ``[B]`` int64 and
``acceptance_rates`` (the synthetic mode's ``K`` rates, else None). It returns a
``specbench.VerifyResult``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specbench.errors import SpecbenchError
from specbench.methods import METHODS
from specbench.truncation import kept_mask
from specbench.verification import MODES, VerifyResult, prepare_verify

FORMS: tuple[str, ...] = ("logits", "probs")
RNG_KINDS: tuple[str, ...] = ("specbench", "own")
CONVERSIONS: tuple[str, ...] = ("outside", "inside")
DEVICES: tuple[str, ...] = ("cpu", "cuda")


@dataclass(frozen=True)
class Implementation:
    """A verification implementation the harness can check and time (module docstring).

    Exactly one of ``fn`` (a plugin: called with the keywords above, in its declared form) and
    ``prepare`` (built in: ``prepare(kwargs)`` takes ``specbench.verify``'s keywords as given and
    returns a zero-argument step) is set. ``target``/``draft`` None means any form as given.
    ``unavailable(device)`` says why it cannot run on this machine at all (a missing package),
    ``unsupported(mode, device)`` why not in one mode; both None when it can.
    """

    name: str
    description: str
    fn: Callable[..., VerifyResult] | None = None
    prepare: Callable[[dict[str, Any]], Callable[[], VerifyResult]] | None = None
    modes: tuple[str, ...] = MODES
    target: str | None = None
    draft: str | None = None
    one_hot: bool = True
    rng: str = "own"
    seeded: bool = False
    batch_invariant: bool = False
    ragged: bool = True
    invalid_drafts: bool = True
    cuda_graph: bool = False
    truncation: bool = False
    logprobs: bool = False
    devices: tuple[str, ...] = DEVICES
    methods: tuple[str, ...] = ("token",)
    truncation_methods: tuple[str, ...] | None = None
    trees: bool = False
    needs_gpu: bool = False
    unavailable: Callable[[torch.device], str | None] = field(default=lambda device: None)
    source: str = "built-in"

    @property
    def same_rng(self) -> bool:
        return self.rng == "specbench"

    def truncates(self, method: str) -> bool:
        """Whether it takes truncation with ``method`` (``truncation_methods``: None is every declared one)."""
        return self.truncation and (self.truncation_methods is None or method in self.truncation_methods)

    def facts(self) -> dict[str, Any]:
        """The declared facts, as a results file records them."""
        return {"name": self.name, "description": self.description, "source": self.source, "modes": list(self.modes),
                "target": self.target or "any", "draft": self.draft or "any", "one_hot": self.one_hot,
                "rng": self.rng, "seeded": self.seeded, "batch_invariant": self.batch_invariant,
                "ragged": self.ragged, "invalid_drafts": self.invalid_drafts, "cuda_graph": self.cuda_graph,
                "truncation": self.truncation, "logprobs": self.logprobs, "devices": list(self.devices),
                "methods": list(self.methods), "trees": self.trees,
                "truncation_methods": [method for method in self.methods if self.truncates(method)]}

    def cannot_run(self, device: torch.device, interpret: bool = False) -> str | None:
        """Why it cannot run on ``device`` in this process at all (``interpret``: the Triton interpreter is on)."""
        if self.needs_gpu and device.type == "cpu" and not interpret:
            return "no GPU here (pass --interpret to run it under the Triton interpreter, small shapes only)"
        if device.type not in self.devices:
            return f"declared for {' and '.join(self.devices)} only, and this run is on {device.type}"
        return self.unavailable(device)

    def unsupported(self, mode: str, device: torch.device) -> str | None:
        """Why this implementation cannot run ``mode`` on ``device`` (its declaration), or None."""
        if mode not in self.modes:
            return f"{self.name} declares the modes {', '.join(self.modes)}, not {mode}"
        if device.type not in self.devices:
            return f"{self.name} runs on {' and '.join(self.devices)}, not {device.type}"
        return None

    def conversions(self, kwargs: dict[str, Any]) -> list[str]:
        """What the harness converts for this implementation on ``verify``-style ``kwargs``,
        e.g. ``["target logits -> probs"]``; empty when it takes the inputs as given."""
        if self.fn is None:
            return []
        done = []
        target_form = "probs" if kwargs.get("target_probs") is not None else "logits"
        if self.target and target_form != self.target:
            done.append(f"target {target_form} -> {self.target}")
        if kwargs.get("mode") == "probabilistic" and self.draft:
            draft_form = next((form for form in FORMS if kwargs.get(f"draft_{form}") is not None), "one-hot")
            if draft_form != self.draft and not (draft_form == "one-hot" and self.one_hot):
                done.append(f"draft {draft_form} -> {self.draft}")
        return done

    def bind(self, kwargs: dict[str, Any], conversion: str = "outside") -> Callable[[], VerifyResult]:
        """A zero-argument call doing one step on ``specbench.verify``'s ``kwargs`` (no ``backend``).

        ``conversion``: ``"outside"`` converts the inputs once, here (what a caller that already
        holds them in the declared form pays), ``"inside"`` in every call (what a caller holding
        the other form pays, so a timer counts it).
        """
        if conversion not in CONVERSIONS:
            raise SpecbenchError(f"conversion must be one of {', '.join(CONVERSIONS)}, got {conversion!r}")
        if self.prepare is not None:
            return self.prepare(kwargs)
        fn = self.fn
        if conversion == "inside" and self.conversions(kwargs):
            # a bad argument fails here, once; whether any row is greedy is read here too, so the
            # timed call converts as a caller would (a softmax) without a host read of its own
            greedy = bool((convert(self, kwargs)["temperatures"] == 0).any())
            return lambda: fn(**convert(self, kwargs, greedy_rows=greedy))
        converted = convert(self, kwargs)
        return lambda: fn(**converted)


def sampler(
    *,
    name: str | None = None,
    description: str = "",
    modes: tuple[str, ...] | list[str] = ("probabilistic",),
    target: str = "logits",
    draft: str = "logits",
    one_hot: bool = False,
    rng: str = "own",
    seeded: bool = False,
    batch_invariant: bool = False,
    ragged: bool = True,
    invalid_drafts: bool = True,
    cuda_graph: bool = False,
    truncation: bool = False,
    logprobs: bool = False,
    devices: tuple[str, ...] | list[str] = DEVICES,
    methods: tuple[str, ...] | list[str] = ("token",),
    trees: bool = False,
    truncation_methods: tuple[str, ...] | list[str] | None = None,
) -> Callable[[Callable[..., VerifyResult]], Implementation]:
    """Declare a function as a specbench implementation (the facts: module docstring).

    ``@sampler(target="probs", draft="probs")`` above ``def my_sampler(**inputs) -> VerifyResult``
    makes ``my_sampler`` an ``Implementation`` that ``--impl path/to/file.py:my_sampler`` loads.
    """
    modes, devices, methods = tuple(modes), tuple(devices), tuple(methods)
    if truncation_methods is not None:
        truncation_methods = tuple(truncation_methods)
        if any(method not in methods for method in truncation_methods):
            raise SpecbenchError(f"truncation_methods must be some of the declared methods ({', '.join(methods)}), "
                                 f"got {list(truncation_methods)}")
    for label, values, allowed in (("modes", modes, MODES), ("devices", devices, DEVICES),
                                   ("methods", methods, tuple(METHODS))):
        if not values or any(value not in allowed for value in values):
            raise SpecbenchError(f"{label} must be some of {', '.join(allowed)}, got {list(values)}")
    for label, value, allowed in (("target", target, FORMS), ("draft", draft, FORMS), ("rng", rng, RNG_KINDS)):
        if value not in allowed:
            raise SpecbenchError(f"{label} must be one of {', '.join(allowed)}, got {value!r}")

    def declare(fn: Callable[..., VerifyResult]) -> Implementation:
        if not callable(fn):
            raise SpecbenchError(f"@sampler must decorate a function, got {type(fn).__name__}")
        doc = (fn.__doc__ or "").strip().splitlines()
        return Implementation(
            name=name or fn.__name__, description=description or (doc[0] if doc else fn.__name__), fn=fn,
            modes=modes, target=target, draft=draft, one_hot=one_hot, rng=rng, seeded=seeded,
            batch_invariant=batch_invariant, ragged=ragged, invalid_drafts=invalid_drafts, cuda_graph=cuda_graph,
            truncation=truncation, logprobs=logprobs, devices=devices, methods=methods, trees=trees,
            truncation_methods=truncation_methods,
            source=f"{fn.__module__}:{fn.__qualname__}",
        )

    return declare


# --- conversions ---------------------------------------------------------------------------------------------------

_F32_MAX = torch.finfo(torch.float32).max


def logits_to_probs(logits: torch.Tensor, temperatures: torch.Tensor, greedy_rows: bool | None = None) -> torch.Tensor:
    """``[B, R, V]`` probabilities (float32) of ``[B, R, V]`` logits at ``[B]`` temperatures.

    Softmax of the cleaned logits (NaN -> -inf, +inf -> the largest float32, as ``verify`` reads
    them) over the temperature; a greedy request (temperature 0) gets the one-hot at each row's
    argmax (ties to the lowest id), and a row with no finite logit all zeros. ``greedy_rows``:
    whether any temperature is 0, when the caller knows (None: read it, a host read on a GPU).
    Four passes over the rows (scale, clean, softmax, the invalid rows' NaN to 0), one more with
    a greedy row: about what a caller holding logits pays for a softmax.
    """
    scale = torch.where(temperatures > 0, 1.0 / torch.where(temperatures > 0, temperatures, 1.0), 1.0)
    cleaned = logits.to(torch.float32) * scale[:, None, None]
    torch.nan_to_num_(cleaned, nan=float("-inf"), posinf=_F32_MAX, neginf=float("-inf"))
    probs = torch.nan_to_num_(torch.softmax(cleaned, dim=-1), nan=0.0)  # a row of -inf gives NaN: all zeros
    if greedy_rows is None:
        greedy_rows = bool((temperatures == 0).any())
    if greedy_rows:
        greedy = (temperatures == 0)[:, None, None]
        row_max, argmax = cleaned.max(dim=-1, keepdim=True)
        probs.masked_fill_(greedy, 0.0)
        probs.scatter_add_(-1, argmax, (greedy & (row_max > float("-inf"))).to(torch.float32).expand_as(argmax))
    return probs


def probs_to_logits(probs: torch.Tensor, temperatures: torch.Tensor) -> torch.Tensor:
    """``T * log p`` (float32) of ``[B, R, V]`` probabilities at ``[B]`` temperatures (``log p`` where
    ``T`` is 0), entries read as ``verify`` reads probabilities (NaN and negative 0, above 1 1): logits before the
    temperature, so the softmax of the result over ``T`` is the cleaned row over its sum."""
    probs = probs.to(torch.float32)
    scale = torch.where(temperatures > 0, temperatures, 1.0)[:, None, None]
    return torch.log(torch.where(probs > 0, probs.clamp(max=1.0), 0.0)) * scale


def truncated_draft_probs(draft_logits: torch.Tensor, temperatures: torch.Tensor, top_k: torch.Tensor | None,
                          top_p: torch.Tensor | None, min_p: torch.Tensor | None) -> torch.Tensor:
    """``[B, K, V]`` float32 ``q'``: the draft logits' softmax at each request's temperature, cut by its
    ``[B]`` knobs (None: off) in each draft row's own order and renormalised over what is kept, as
    ``verify`` reads draft logits under truncation (``truncate_draft_logits=True``). A greedy request
    (temperature 0) is softmaxed at 1 and not cut, as without truncation; a row with no finite logit
    is all zeros. The kept set is ``specbench.truncation.kept_mask``'s.
    """
    sampled = temperatures > 0
    scale = torch.where(sampled, 1.0 / torch.where(sampled, temperatures, 1.0), 1.0)
    cleaned = draft_logits.to(torch.float32) * scale[:, None, None]
    torch.nan_to_num_(cleaned, nan=float("-inf"), posinf=_F32_MAX, neginf=float("-inf"))

    def per_row(knob: torch.Tensor | None, off: float) -> torch.Tensor | None:
        # greedy requests are never cut: their knobs read as off
        return None if knob is None else torch.where(sampled, knob, torch.full_like(knob, off))[:, None]

    keep = kept_mask(cleaned, per_row(top_k, 0), per_row(top_p, 1.0), per_row(min_p, 0.0), is_probs=False)
    return torch.nan_to_num_(torch.softmax(cleaned.masked_fill_(~keep, float("-inf")), dim=-1), nan=0.0)


def one_hot_rows(draft_token_ids: torch.Tensor, vocab: int) -> torch.Tensor:
    """``[B, K, V]`` float32 one-hot at each draft; a row of zeros for an id outside ``[0, V)``."""
    valid = (draft_token_ids >= 0) & (draft_token_ids < vocab)
    rows = torch.zeros(*draft_token_ids.shape, vocab, dtype=torch.float32, device=draft_token_ids.device)
    rows.scatter_(-1, draft_token_ids.clamp(0, vocab - 1)[..., None], valid[..., None].to(torch.float32))
    return rows


def convert(impl: Implementation, kwargs: dict[str, Any], greedy_rows: bool | None = None) -> dict[str, Any]:
    """``specbench.verify``'s ``kwargs`` checked (as ``verify`` checks them) and turned into the keywords
    ``impl.fn`` is called with, in its declared forms (module docstring); ``greedy_rows``: whether any
    temperature is 0, when known (``logits_to_probs``)."""
    _, checked = prepare_verify(**kwargs, backend="torch")
    mode = checked["mode"]
    given_probs = kwargs.get("target_probs") is not None
    target = checked["target_probs"] if given_probs else checked["target_logits"]
    temperatures = checked["temperatures"]
    dtype = target.dtype
    if impl.target == "probs" and not given_probs:
        target = logits_to_probs(target, temperatures, greedy_rows).to(dtype)
    elif impl.target == "logits" and given_probs:
        target = probs_to_logits(target, temperatures).to(dtype)
    call = {"mode": mode, f"target_{impl.target}": target, "draft_token_ids": checked["draft_token_ids"],
            "num_draft_tokens": checked["num_draft_tokens"], "temperatures": temperatures, "seeds": checked["seeds"],
            "positions": checked["positions"], "acceptance_rates": kwargs.get("acceptance_rates")}
    if impl.truncation:
        call.update({name: checked[name] for name in ("top_k", "top_p", "min_p", "truncate_draft_logits")})
        if impl.draft == "logits" and checked["draft_probs"] is not None:
            # draft probabilities are the drafter's distribution as given: their T * log q must not be cut again
            call["truncate_draft_logits"] = False
    if impl.logprobs:
        call["logprobs"] = checked["logprobs"]
    if impl.methods != ("token",):
        call["method"] = checked["method"]
    if checked.get("tree_parents") is not None:  # a tree call: `specbench verify --tree` makes them only to `trees`
        call.update(tree_parents=checked["tree_parents"], tree_candidates=checked["tree_candidates"])
    if mode == "probabilistic":
        call[f"draft_{impl.draft}"] = _draft_in_form(impl, checked, temperatures, target.shape[-1], dtype)
    return call


def _draft_in_form(impl: Implementation, checked: dict[str, Any], temperatures: torch.Tensor, vocab: int,
                   dtype: torch.dtype) -> torch.Tensor | None:
    draft_logits, draft_probs = checked["draft_logits"], checked["draft_probs"]
    drafts = checked["draft_token_ids"]
    if draft_logits is None and draft_probs is None:
        if impl.one_hot:
            return None
        rows = one_hot_rows(drafts, vocab)
        return (rows if impl.draft == "probs" else torch.log(rows)).to(dtype)
    if impl.draft == "probs":
        if draft_probs is not None:
            return draft_probs
        if impl.truncation and checked["truncate_draft_logits"] and any(
                checked[name] is not None for name in ("top_k", "top_p", "min_p")):
            probs = truncated_draft_probs(draft_logits, temperatures, checked["top_k"], checked["top_p"],
                                          checked["min_p"])
        else:
            probs = logits_to_probs(draft_logits, torch.where(temperatures == 0, 1.0, temperatures), greedy_rows=False)
        # a draft-logit row with no finite value (all zeros now) is a one-hot draft (the verify rules)
        invalid = ~(probs.amax(dim=-1, keepdim=True) > 0)
        valid_id = (drafts >= 0) & (drafts < vocab)
        probs.scatter_add_(-1, drafts.clamp(0, vocab - 1)[..., None], (invalid & valid_id[..., None]).to(torch.float32))
        return probs.to(dtype)
    if draft_logits is not None:
        return draft_logits
    return probs_to_logits(draft_probs, temperatures).to(dtype)
