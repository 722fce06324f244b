"""SGLang's CUDA speculative kernels, built from an installed SGLang's sources by specbench's own entry file.

SGLang (0.5.23) ships its CUDA kernels as headers (``sglang/kernels/jit/csrc``, ``sglang/kernels/jit/include``)
and builds them on first use through apache-tvm-ffi; its loader imports SGLang's server packages, which a
benchmark machine need not have. Here the same headers are compiled with ``tvm_ffi.cpp.load``: an entry file
written here includes the kernel's header and exports its host function with ``TVM_FFI_DLL_EXPORT_TYPED_FUNC``;
``-DSGL_CUDA_ARCH`` (major * 100 + minor * 10) and ``-std=c++20 -O3 --expt-relaxed-constexpr`` are the flags
SGLang's loader passes, and the target is the current GPU's (``TVM_FFI_CUDA_ARCH_LIST`` set to it for the build
alone). It needs nvcc and ninja (``pip install "apache-tvm-ffi[cpp]"``). Builds are kept under
``~/.cache/specbench/sglang-jit/`` (``SPECBENCH_CACHE`` moves it), one folder per entry and GPU architecture; a
build that failed is not tried again in the same process. tvm-ffi launches each call on torch's current stream of
its tensors' device (it reads it on every call), so a call inside ``torch.cuda.graph`` is captured.

- ``tree_walker()``: ``verify_tree_greedy`` (``speculative/tree.cuh``), the greedy tree walker SGLang's server
  runs on NVIDIA GPUs: ``predicts`` ``[B * M]`` int32, ``accept_index`` ``[B, S]`` int32, ``accept_token_num``
  ``[B]`` int32, then ``candidates``, ``retrive_index``, ``retrive_next_token``, ``retrive_next_sibling`` and
  ``target_predict``, each ``[B, M]`` int64, contiguous, on one CUDA device.
- ``tree_sampler(vec_size)``: ``tree_speculative_sampling_target_only<vec_size, true>``
  (``speculative/sampling.cuh``), the probabilistic tree kernel SGLang's server runs on NVIDIA GPUs without a
  draft distribution ("target-only"): the arguments above, then ``uniform_samples`` ``[B, M]`` and
  ``uniform_samples_for_final_sampling`` ``[B]`` float32, ``target_probs`` and ``draft_probs`` ``[B, M, V]``
  float32, ``threshold_single`` and ``threshold_acc``; ``vec_size`` is ``gcd(4, V)``. It includes FlashInfer's
  sampling headers (``flashinfer/data/include`` of an installed FlashInfer) and cuRAND's (the CUDA toolkit's,
  or, where the toolkit lacks them, an installed ``nvidia-curand``'s). It reads ``target_probs`` and writes
  ``draft_probs`` at each tested node's draft id (no bounds check) and indexes them in 32 bits.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

from specbench.errors import SpecbenchError

# the headers tvm-ffi's exports need, then the kernel's, then one export a host function
_ENTRY = """// written by specbench: SGLang's {header}, its host function {function} exported as {export}
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

#include "{header}"

TVM_FFI_DLL_EXPORT_TYPED_FUNC({export}, ({function}));
"""


def sglang_dir() -> Path:
    """The installed SGLang package's folder, found without importing it (find_spec only locates it: importing
    ``sglang`` would pull in its server's dependencies)."""
    package = importlib.util.find_spec("sglang")
    if package is None or not package.submodule_search_locations:
        raise SpecbenchError("SGLang is not installed (pip install sglang)")
    return Path(package.submodule_search_locations[0])


def sglang_jit_dir() -> Path:
    """The installed SGLang's ``kernels/jit`` folder (headers under ``include`` and ``csrc``)."""
    folder = sglang_dir() / "kernels" / "jit"
    if not (folder / "csrc").is_dir() or not (folder / "include").is_dir():
        raise SpecbenchError(f"this SGLang has no CUDA kernel sources where 0.5.23 keeps them ({folder}/csrc, "
                             f"{folder}/include)")
    return folder


def entry_source(header: str, function: str, export: str) -> str:
    """The entry file that exports ``function`` (C++, namespace included) of ``header`` as ``export``."""
    return _ENTRY.format(header=header, function=function, export=export)


def build_flags(capability: tuple[int, int]) -> list[str]:
    """nvcc's flags for SGLang's headers on a GPU of compute ``capability`` (major, minor)."""
    major, minor = capability
    return ["-std=c++20", "-O3", "--expt-relaxed-constexpr", f"-DSGL_CUDA_ARCH={major * 100 + minor * 10}"]


def _extra_includes(header: str) -> list[str]:
    # the header-only dependencies a kernel's header includes beyond SGLang's own: FlashInfer's sampling headers
    # and cuRAND's, for speculative/sampling.cuh
    if header != "speculative/sampling.cuh":
        return []
    package = importlib.util.find_spec("flashinfer")
    if package is None or not package.submodule_search_locations:
        raise SpecbenchError("FlashInfer is not installed (pip install flashinfer-python): SGLang's tree sampling "
                             "kernel includes its sampling headers")
    found = [Path(package.submodule_search_locations[0]) / "data" / "include"]
    if not found[0].is_dir():
        raise SpecbenchError(f"this FlashInfer has no headers where SGLang 0.5.23 reads them ({found[0]})")
    if not (_cuda_home() / "include" / "curand.h").is_file():  # (pip's CUDA headers only where the toolkit lacks
        nvidia = importlib.util.find_spec("nvidia")  # them: searched before the toolkit's, they would shadow it)
        for root in (nvidia.submodule_search_locations or []) if nvidia is not None else []:
            found += sorted(path.parent for path in Path(root).glob("*/include/curand.h"))
    return [str(path) for path in found]


def _cuda_home() -> Path:
    # the CUDA toolkit nvcc belongs to: CUDA_HOME, CUDA_PATH, nvcc's folder's parent, /usr/local/cuda
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return Path(os.environ[name])
    nvcc = shutil.which("nvcc")
    return Path(nvcc).resolve().parent.parent if nvcc else Path("/usr/local/cuda")


_BUILT: dict[tuple, object] = {}  # (export, capability) -> the loaded module, or the SpecbenchError its build gave


def _load(header: str, function: str, export: str):
    """The module exporting ``function`` of ``header`` as ``export``, built for the current GPU (once a process)."""
    import torch

    try:
        from tvm_ffi import cpp
    except ImportError as error:
        raise SpecbenchError('apache-tvm-ffi is not installed (pip install "apache-tvm-ffi[cpp]"): SGLang\'s CUDA '
                             "kernels are built through it") from error
    if not torch.cuda.is_available():
        raise SpecbenchError("SGLang's CUDA kernels need a CUDA GPU to be built for")
    capability = torch.cuda.get_device_capability()
    key = (export, capability)
    if key not in _BUILT:
        try:
            _BUILT[key] = _build(cpp, header, function, export, capability)
        except SpecbenchError as error:
            _BUILT[key] = error
    if isinstance(_BUILT[key], SpecbenchError):
        raise _BUILT[key]
    return _BUILT[key]


def _build(cpp, header: str, function: str, export: str, capability: tuple[int, int]):
    # one build (or a cached one reused) and its load; a failure is one SpecbenchError
    folder = sglang_jit_dir()
    includes = [str(folder / "include"), str(folder / "csrc"), *_extra_includes(header)]
    major, minor = capability
    name = f"sglang_{export}_sm{major}{minor}"
    cache = Path(os.environ.get("SPECBENCH_CACHE", Path.home() / ".cache" / "specbench")) / "sglang-jit" / name
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / "entry.cu"
    source = entry_source(header, function, export)
    if not entry.is_file() or entry.read_text() != source:
        entry.write_text(source)
    before = os.environ.get("TVM_FFI_CUDA_ARCH_LIST")
    os.environ["TVM_FFI_CUDA_ARCH_LIST"] = f"{major}.{minor}"  # (the target tvm-ffi's build passes nvcc)
    try:
        return cpp.load(name, cuda_files=[str(entry)], extra_include_paths=includes,
                        extra_cuda_cflags=build_flags(capability), build_directory=str(cache))
    except Exception as error:  # a compiler's or linker's failure: the lines that name an error say why
        lines = [line.strip() for line in str(error).splitlines()
                 if any(word in line.lower() for word in ("error", "cannot find", "undefined reference"))]
        detail = " | ".join(lines[:4]) if lines else " ".join(str(error).split())[-600:]
        raise SpecbenchError(f"building SGLang's {header} ({function}) in {cache} failed: {type(error).__name__}: "
                             f"{detail}") from error
    finally:
        if before is None:
            os.environ.pop("TVM_FFI_CUDA_ARCH_LIST", None)
        else:
            os.environ["TVM_FFI_CUDA_ARCH_LIST"] = before


def tree_walker():
    """SGLang's greedy tree walker ``verify_tree_greedy`` (module docstring), built for the current GPU."""
    return _load("speculative/tree.cuh", "sglang::verify_tree_greedy", "verify_tree_greedy").verify_tree_greedy


def tree_sampler(vec_size: int):
    """SGLang's target-only tree sampler for rows of ``V`` tokens, ``vec_size = gcd(4, V)`` (module docstring),
    built for the current GPU."""
    if vec_size not in (1, 2, 4):
        raise SpecbenchError(f"SGLang's tree sampler reads 1, 2 or 4 tokens at a time, got {vec_size}")
    export = f"tree_sampling_target_only_v{vec_size}"
    module = _load("speculative/sampling.cuh", f"sglang::tree_speculative_sampling_target_only<{vec_size}, true>",
                   export)
    return getattr(module, export)
