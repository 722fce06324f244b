"""Verification implementations: the contract (``contract``), specbench's own (``builtin``), adapters
for peers (``adapters``: FlashInfer, vLLM), negative controls (``controls``) and lookup by name,
entry point or file (``registry``).

A plugin is a function declared with ``sampler``::

    from specbench.implementations import sampler

    @sampler(modes=["probabilistic"], target="probs", draft="probs")
    def my_sampler(*, target_probs, draft_token_ids, draft_probs, **rest) -> VerifyResult: ...

Names are loaded on first use, so importing this package does not import torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Implementation": "specbench.implementations.contract",
    "sampler": "specbench.implementations.contract",
    "DEFAULT_IMPLEMENTATIONS": "specbench.implementations.registry",
    "known_names": "specbench.implementations.registry",
    "resolve": "specbench.implementations.registry",
    "resolve_all": "specbench.implementations.registry",
}

__all__ = ["DEFAULT_IMPLEMENTATIONS", "Implementation", "known_names", "resolve", "resolve_all", "sampler"]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'specbench.implementations' has no attribute {name!r}")
