"""The Triton kernels and their launcher (``launch.py``). Under ``TRITON_INTERPRET=1`` (the kernels run on the
CPU) importing this package first makes Triton's interpreter patch ``triton.language`` once per launch, not at
every helper call (``interpreter.py``: about half of an interpreted kernel's time), and skip the overflow checks
whose asserts are off."""

import os

if os.environ.get("TRITON_INTERPRET") == "1":
    from specbench.kernels.interpreter import patch_language_once_per_launch, skip_unchecked_overflow_tests

    patch_language_once_per_launch()
    skip_unchecked_overflow_tests()
