"""Triton's interpreter (``TRITON_INTERPRET=1``, how the kernels run on a CPU), made cheaper to call.

Triton 3.6 to 3.9 patch ``triton.language`` for the interpreter when a launch starts and undo it when the
launch ends (``GridExecutor``). They also patch it again at every call of a ``@triton.jit`` helper inside the
launch (``InterpretedFunction``). Those calls find the same modules already patched:
- the builtins are wrapped already, and a wrapper is not a builtin, so nothing is wrapped twice;
- the rest is set again to what it already is.

Each call still walks every member of the language modules (``inspect.getmembers``). Here that was about half
of an interpreted kernel's time: a test of 300 programs took 77 s under the profiler, 40 s of it in those walks.

``patch_language_once_per_launch`` makes a helper skip the walk when the launch has already patched every
language module the helper's globals hold. It changes no value a kernel computes. Where the interpreter does
not have these functions (another Triton), it changes nothing.

``skip_unchecked_overflow_tests`` turns off the interpreter's integer overflow sanitizer where its asserts are
off (``debug`` false, the interpreter's default): every integer add, subtract and multiply then computed its
result again in int64 and compared it with both int32 bounds for an assert that returns before it looks at
them. Three tests of the split histogram path (three seeds each) took 84 s on one core with those checks and
52 s without. With ``debug`` on it changes nothing (the checks then assert).
"""

from __future__ import annotations

import dataclasses

_applied = False


def patch_language_once_per_launch() -> None:
    """Within an interpreted launch, patch each language module once (module docstring). Idempotent."""
    global _applied
    if _applied:
        return
    try:
        import triton.language as tl
        from triton.runtime import interpreter
    except ImportError:
        return
    patch_lang = getattr(interpreter, "_patch_lang", None)
    executor = getattr(interpreter, "GridExecutor", None)
    scope_type = getattr(interpreter, "_LangPatchScope", None)
    if patch_lang is None or executor is None or scope_type is None:
        return
    patched: list[set[int]] = []  # per launch under way, the language modules it has patched

    def languages(fn) -> set[int]:
        return {id(value) for value in fn.__globals__.values() if value is tl or value is tl.core}

    def patch_once(fn):
        wanted = languages(fn)
        if patched and wanted and wanted <= patched[-1]:
            return scope_type()  # nothing to undo: the launch's own scope undoes the launch's patches
        scope = patch_lang(fn)
        if patched:
            patched[-1] |= wanted
        return scope

    launch = executor.__call__

    def launch_patching_once(self, *args, **kwargs):
        patched.append(set())
        try:
            return launch(self, *args, **kwargs)
        finally:
            patched.pop()

    interpreter._patch_lang = patch_once
    executor.__call__ = launch_patching_once
    _applied = True


def skip_unchecked_overflow_tests() -> None:
    """Where the interpreter's asserts are off, stop it computing overflow checks for them (module docstring)."""
    try:
        from triton.runtime import interpreter
    except ImportError:
        return
    builder = getattr(interpreter, "interpreter_builder", None)
    options = getattr(builder, "options", None)
    if options is None or not dataclasses.is_dataclass(options):
        return
    if getattr(options, "debug", True) or not getattr(options, "sanitize_overflow", False):
        return
    builder.options = dataclasses.replace(options, sanitize_overflow=False)
