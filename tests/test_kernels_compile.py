"""Every Triton kernel variant the launcher can pick compiles for Hopper (sm_90), here, with no GPU.

The interpreter runs kernels as numpy and never lowers them, so a kernel only the compiler
rejects (a float64 constant in a float32 loop-carried value, an int that should be a
``tl.constexpr``) would pass every other test on a CPU machine and break on the first GPU.
``tests/compile_kernels.py`` lowers each variant to a cubin in a subprocess without
``TRITON_INTERPRET``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from compile_kernels import variants  # tests/ is on sys.path under pytest

SCRIPT = Path(__file__).with_name("compile_kernels.py")
REPO = SCRIPT.parent.parent


def test_every_kernel_variant_compiles_for_hopper(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)  # compile now, not from an earlier run's cache
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    run = subprocess.run([sys.executable, str(SCRIPT), "90"], check=False, env=env, capture_output=True, text=True, timeout=900)
    if run.returncode == 3:
        pytest.skip(run.stderr.strip())
    assert run.returncode == 0, run.stderr[-4000:]
    compiled = [json.loads(line) for line in run.stdout.splitlines()]
    expected = [(getattr(kernel, "fn", kernel).__name__, constexprs, dtype) for kernel, constexprs, _warps, dtype in variants()]
    assert [(row["kernel"], row["constexprs"], row["dtype"]) for row in compiled] == expected
    assert all(row["cubin_bytes"] > 0 for row in compiled)
