"""Programmatic dependent launch: a launch that starts while the launch before it is still running.

On a GPU of compute capability 9.0 or later (Hopper), a kernel launched with CUDA's programmatic stream
serialization (Triton's compile option ``launch_pdl``) may be placed on the multiprocessors before the kernel ahead of
it in the stream has finished: as soon as every program of that kernel has signalled that its dependents may start
(``griddepcontrol.launch_dependents``) or has exited. Its programs then hold their registers and shared memory,
waiting, and run on the moment the kernel ahead has finished and its writes are visible, so the start of each launch
(the launch itself, the placing of its programs) overlaps the run of the one before. A small batch's truncated step
is a chain of eight or nine dependent launches on a GPU it does not fill, where that start is a large share of
each launch's time.

The contract that keeps this exact, for every kernel that takes ``PDL``:

- Its first statement is ``wait_for_launch_before(PDL)``: with ``PDL`` set, every program waits there
  (``griddepcontrol.wait``) until the kernel ahead in the stream has finished and its memory operations are
  visible, and only then signals that the kernel behind it may be placed. Nothing before it reads or writes memory,
  so no program reads what the kernel ahead has not yet written, nor writes what it still reads.
- Every program passes through that wait before it can exit, so a kernel's end implies the end of the kernel ahead
  of it, and of every kernel before that: the chain is ordered as the stream orders it without PDL.
- A kernel ahead that signals nothing (a torch operation, a kernel launched without PDL) signals when it exits, and
  the wait still covers its writes; a launch without PDL after a PDL kernel waits for it to finish, as always.

The signal comes after the wait so that at most two kernels of the chain are on the GPU at once: the one running
and the next one waiting. The hardware places a dependent kernel's programs only once every program of the kernel
ahead has started (a program signals while it runs), so waiting programs never keep the kernel ahead from being
placed. Triton's interpreter has neither instruction; the launcher never sets ``PDL`` there.

Two facts of the toolchain this leans on: the two instructions can be called from a kernel under Triton 3.6 and
later, the versions this project supports (under 3.4, which added them, the call failed: triton-lang/triton issue
7377), and Triton's software pipeliner has been seen to move a loop's loads above a wait placed inside the loop
(triton-lang/triton issue 11905), which is why the wait is the kernel's first statement, before any loop, and why
the compile check (``tests/compile_kernels.py``) counts the memory instructions ahead of it in each such kernel's
PTX (none). compute-sanitizer's racecheck watches shared memory only, so a missing wait would not show there: the
GPU test compares the tokens with and without dependent launches, bit for bit.
"""

import triton
import triton.language as tl
from triton.language.extra.cuda import gdc_launch_dependents, gdc_wait


@triton.jit
def wait_for_launch_before(PDL: tl.constexpr):
    """With ``PDL``: wait until the kernel ahead in the stream has finished and its writes are visible, then let
    the kernel behind be placed. Without: nothing."""
    if PDL:
        gdc_wait()
        gdc_launch_dependents()
