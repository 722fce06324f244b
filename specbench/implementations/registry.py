"""Finding implementations by name: built in, shipped controls and adapters, installed plugins, files.

``--impl`` takes, comma-separated:

- a registered name: ``torch``, ``triton`` (and its forced kernel shapes ``triton-sequential`` and
  ``triton-split``), the adapters ``flashinfer``, ``flashinfer-truncated`` and ``vllm``, the negative
  controls ``control-*``;
- a Triton launch variant spelled out: ``triton-sequential-4096x16`` (tokens per block x warps per
  program), ``triton-split-2048x8-chunk32768`` (and the most tokens a split program reads of a row),
  ``triton-tree-finish64-cand`` (the tree's split path, its finish kernel's slices and candidates);
- a name an installed package registers under the entry-point group ``specbench.implementations``
  (``[project.entry-points."specbench.implementations"] my-sampler = "my_pkg.verify:my_sampler"``);
- ``package.module:function`` or ``path/to/file.py:function``, where ``function`` was declared with
  ``@specbench.implementations.sampler(...)``.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path

from specbench.errors import SpecbenchError
from specbench.implementations import adapters, controls
from specbench.implementations.builtin import BUILT_IN, launch_variant
from specbench.implementations.contract import Implementation

ENTRY_POINT_GROUP = "specbench.implementations"

# what `specbench kernels` times unless --impl names others (the launch variants are for side-by-side runs)
DEFAULT_IMPLEMENTATIONS: tuple[str, ...] = ("torch", "triton")


def registered() -> dict[str, Implementation]:
    """Every implementation known by name without importing a plugin: built in, adapters, controls."""
    return {**BUILT_IN, **adapters.ADAPTERS, **controls.CONTROLS}


@functools.lru_cache(maxsize=1)
def _entry_points() -> dict[str, importlib.metadata.EntryPoint]:
    return {point.name: point for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}


def known_names() -> list[str]:
    """Registered names, then installed plugins' names (not imported)."""
    names = list(registered())
    return names + [name for name in sorted(_entry_points()) if name not in names]


def resolve(spec: str) -> Implementation:
    """The implementation ``spec`` names (module docstring); an unknown or broken one is a ``SpecbenchError``."""
    spec = spec.strip()
    table = registered()
    if spec in table:
        return table[spec]
    variant = launch_variant(spec)
    if variant is not None:
        return variant
    points = _entry_points()
    if spec in points:
        try:
            found = points[spec].load()
        except Exception as exc:  # noqa: BLE001 -- a broken plugin is the user's input: one sentence, not a traceback
            raise SpecbenchError(f"the installed plugin {spec!r} ({points[spec].value}) failed to import: "
                                 f"{type(exc).__name__}: {exc}") from None
        return _declared(found, f"the installed plugin {spec!r} ({points[spec].value})")
    if ":" in spec:
        where, _, attribute = spec.rpartition(":")
        module = _load_file(where) if where.endswith(".py") or "/" in where else _load_module(where)
        if not attribute or not hasattr(module, attribute):
            raise SpecbenchError(f"{where} has no attribute {attribute!r} (--impl takes module:function or "
                                 f"file.py:function)")
        return _declared(getattr(module, attribute), spec)
    if spec.endswith(".py") or "/" in spec:  # a plugin file without its function
        raise SpecbenchError(f"{spec!r} is a path, not an implementation: give a plugin file as FILE.py:FUNCTION, "
                             f"FUNCTION declared with @specbench.implementations.sampler(...)")
    raise SpecbenchError(f"unknown implementation {spec!r}; choose from {', '.join(known_names())}, a Triton launch "
                         f"variant (triton-split-1024x4, triton-sequential-4096x16, triton-radix-4096x1024x8, "
                         f"triton-histogram-4096x1024x4, triton-tree-finish64: `specbench kernels --help`), or give "
                         f"package.module:function or path/to/file.py:function")


def resolve_all(specs: list[str]) -> list[Implementation]:
    """``resolve`` for each spec, once each; two implementations with one name are a usage error."""
    chosen: dict[str, Implementation] = {}
    for spec in dict.fromkeys(specs):
        impl = resolve(spec)
        if impl.name in chosen:
            raise SpecbenchError(f"two implementations are called {impl.name!r} ({chosen[impl.name].source} and "
                                 f"{impl.source}); give one a different name with @sampler(name=...)")
        chosen[impl.name] = impl
    return list(chosen.values())


def _declared(found: object, where: str) -> Implementation:
    if isinstance(found, Implementation):
        return found
    if callable(found):
        raise SpecbenchError(f"{where} is a plain function: declare what it takes and supports with "
                             f"@specbench.implementations.sampler(...) above it")
    kind = type(found).__name__
    raise SpecbenchError(f"{where} is {_article(kind)} {kind}, not an implementation declared with "
                         f"@specbench.implementations.sampler(...)")


def _article(word: str) -> str:
    """``an`` before a vowel sound (an int, an object, an UndefinedType), else ``a`` (a str, a uint8, a UserDict)."""
    start = word[:3].lower()
    return "an" if start[:1] in ("a", "e", "i", "o") or (start[:2] == "un" and start != "uni") else "a"


def _load_module(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        raise SpecbenchError(f"cannot import {name!r}: {exc}") from None
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- whatever a plugin raises on import is one sentence
        raise SpecbenchError(f"importing {name!r} failed: {type(exc).__name__}: {exc}") from None


def _load_file(path: str):
    file = Path(path).expanduser()
    if file.is_dir():
        raise SpecbenchError(f"plugin file {path} is a folder; give path/to/file.py:function")
    if not file.is_file():
        raise SpecbenchError(f"no such plugin file: {path}")
    if file.suffix != ".py":
        raise SpecbenchError(f"plugin file {path} is not a Python file (its name must end in .py)")
    try:
        file.open("rb").close()
    except OSError as exc:
        raise SpecbenchError(f"cannot read plugin file {path}: {exc.strerror or exc}") from None
    module_name = f"specbench_plugin_{abs(hash(str(file.resolve())))}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- whatever a plugin file raises is one sentence
        del sys.modules[module_name]
        raise SpecbenchError(f"loading {path} failed: {type(exc).__name__}: {exc}") from None
    return module
