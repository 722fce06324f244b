"""Every Triton kernel variant the launcher can pick compiles for Hopper (sm_90), here, with no GPU.

The interpreter runs kernels as numpy and never lowers them, so a kernel only the compiler
rejects (a float64 constant in a float32 loop-carried value, an int that should be a
``tl.constexpr``) would pass every other test on a CPU machine and break on the first GPU.
``tests/compile_kernels.py`` lowers each variant to a cubin in a subprocess without
``TRITON_INTERPRET``, started with the test session (``conftest.py``). It takes about 13 minutes of
one core, so the test is marked ``compile`` and a plain ``pytest`` leaves it out: ``pytest -m compile``
runs it on every core (about 7 minutes on two), and CI runs it after the suite.
"""

from __future__ import annotations

import json

import pytest
from compile_kernels import variants  # tests/ is on sys.path under pytest

pytestmark = pytest.mark.compile


def test_every_kernel_variant_compiles_for_hopper(kernel_compile_run):
    run = kernel_compile_run.result(timeout=900)  # started with the session (conftest.py)
    if run.returncode == 3:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr[-4000:]
    compiled = [json.loads(line) for line in run.stdout.splitlines()]
    expected = [(getattr(kernel, "fn", kernel).__name__, constexprs, dtype) for kernel, constexprs, _warps, dtype in variants()]
    assert [(row["kernel"], row["constexprs"], row["dtype"]) for row in compiled] == expected
    assert all(row["cubin_bytes"] > 0 for row in compiled)
    # the fused truncated step compiles with the launcher's register cap, and keeps within it
    capped = [row for row in compiled if row["kernel"] == "_verify_truncated_kernel" and row["constexprs"].get("FUSED")]
    assert capped and all(row["max_registers"] == 128 and row.get("reg", 0) <= 128 for row in capped)
    # the tree finish kernel's waiting programs read the state they waited for with an acquire (split.wait_until)
    finish = [row for row in compiled if row["kernel"] == "_tree_finish_kernel"]
    assert finish and all(row["acquire_loads"] >= 1 for row in finish), [row["acquire_loads"] for row in finish]
    # a dependent launch's kernel waits for the launch before and then signals the launch after, once each; every
    # other variant holds neither instruction (dependent_launch.py)
    dependent = [(row["kernel"], row["grid_dependency_controls"], row["memory_before_grid_wait"]) for row in compiled
                 if row["constexprs"].get("PDL")]
    assert len(dependent) == 9 and all(count == 2 and before == 0 for _kernel, count, before in dependent), dependent
    others = [(row["kernel"], row["constexprs"]) for row in compiled
              if not row["constexprs"].get("PDL") and row["grid_dependency_controls"]]
    assert not others, others
    # a thread's own product fused into a cross-thread add leaves one sum's threads disagreeing (racecheck)
    fused = [(row["kernel"], row["constexprs"], row["dtype"]) for row in compiled if row["fused_shuffles"]]
    assert not fused, fused
