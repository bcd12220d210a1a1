"""SlimReduce from Python: where the library is installed, and its C API
(interpose/slimreduce.h) over ctypes.

``library_path()`` names the installed ``libslimreduce.so`` (or, with
``nccl=True``, ``libslimreduce_nccl.so``; ``mpich=True``,
``libslimreduce-mpich.so``), for scripts that set ``LD_PRELOAD`` themselves;
``slimreduce-run`` does it for a whole job. ``libraries()``, ``mpi_abis()`` and
``mpi_abi()`` say which libraries are installed and which MPI ABI each speaks
(``python -m slimreduce`` prints it).

The other functions talk to the copy of the library that is already loaded in
this process (a job started with ``LD_PRELOAD``, by ``slimreduce-run`` or by
hand). They never load the library: a second copy would have its own runtime,
counters and settings, and would see none of the job's calls. They look the C
API up in the process's global symbols (``ctypes.CDLL(None)``, where a
preloaded library's symbols are), then in an already-loaded
``libslimreduce.so`` or ``libslimreduce_nccl.so`` (``RTLD_NOLOAD``, which
never loads anything). When the library is not in the process (the job was
started without it), ``is_loaded()`` is False and every other call raises
``NotLoadedError``. When it is loaded but its runtime is not up yet (before
``MPI_Init``, or in an NCCL-only job before the first NCCL call), the calls
raise ``SlimReduceError``.

Only the standard library is used.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path

__all__ = [
    "SlimReduceError",
    "NotLoadedError",
    "SETTING_NAMES",
    "library_path",
    "libraries",
    "mpi_abis",
    "mpi_abi",
    "is_loaded",
    "version",
    "counters",
    "counter",
    "compressor",
    "set_compressor",
    "set_topk_ratio",
    "setting",
    "settings",
]

LIBRARY = "libslimreduce.so"
NCCL_LIBRARY = "libslimreduce_nccl.so"
# The build for the MPICH family's ABI (docs/architecture.md, "Two MPI builds"),
# installed beside LIBRARY.
MPICH_LIBRARY = "libslimreduce-mpich.so"
# Which MPI ABI each MPI library speaks: its name says it (the build names it
# so, cmake/SlimReduceMpiAbi.cmake; the CMake package reads it the same way).
# The default library, libslimreduce.so, is Open MPI's.
MPI_ABIS = {LIBRARY: "openmpi", MPICH_LIBRARY: "mpich"}
ABI_NAMES = {"openmpi": "Open MPI", "mpich": "the MPICH family (MPICH, Intel MPI, MVAPICH, Cray MPICH)"}

# Every SLIMREDUCE_* setting, in docs/configuration.md's order (a test checks
# this list against the table that slimreduce-settings prints).
SETTING_NAMES = (
    "SLIMREDUCE_COMPRESSOR",
    "SLIMREDUCE_AUTO_CANDIDATES",
    "SLIMREDUCE_TOPK_RATIO",
    "SLIMREDUCE_TOPK_VALUES",
    "SLIMREDUCE_TOPK_ALGORITHM",
    "SLIMREDUCE_QUANT_BITS",
    "SLIMREDUCE_QUANT_BUCKET",
    "SLIMREDUCE_QUANT_CODES",
    "SLIMREDUCE_QUANT_ROUNDING",
    "SLIMREDUCE_QUANT_SEED",
    "SLIMREDUCE_POWERSGD_RANK",
    "SLIMREDUCE_POWERSGD_MIN_COMPRESSION",
    "SLIMREDUCE_POWERSGD_BLAS",
    "SLIMREDUCE_ADAPTIVE",
    "SLIMREDUCE_ADAPTIVE_WINDOW",
    "SLIMREDUCE_ADAPTIVE_THRESHOLD",
    "SLIMREDUCE_ERROR_FEEDBACK",
    "SLIMREDUCE_MIN_BYTES",
    "SLIMREDUCE_WARMUP_STEPS",
    "SLIMREDUCE_EF_MAX_BYTES",
    "SLIMREDUCE_EF_EVICT_CALLS",
    "SLIMREDUCE_FUSION_THRESHOLD",
    "SLIMREDUCE_PARTITION_BYTES",
    "SLIMREDUCE_PIPELINE",
    "SLIMREDUCE_PRIORITY",
    "SLIMREDUCE_HIERARCHICAL",
    "SLIMREDUCE_LOCAL_SIZE",
    "SLIMREDUCE_REPORT",
    "SLIMREDUCE_TIMELINE",
    "SLIMREDUCE_LOG_LEVEL",
)


class SlimReduceError(RuntimeError):
    """A C API call failed (runtime not up, unknown name, value out of range)."""


class NotLoadedError(SlimReduceError):
    """The library is not loaded in this process (the job was not preloaded)."""


# ---- where the library is installed -------------------------------------------------------


def _library_dirs():
    """Folders that may hold the installed libraries, most specific first."""
    package = Path(__file__).resolve().parent
    dirs = [package / "lib"]  # a wheel: site-packages/slimreduce/lib
    # cmake --install: PREFIX/share/slimreduce/python/slimreduce, the library in PREFIX/lib
    if [p.name for p in list(package.parents)[:3]] == ["python", "slimreduce", "share"]:
        dirs.append(package.parents[3] / "lib")
    return dirs


def library_path(nccl: bool = False, mpich: bool = False) -> str:
    """The installed libslimreduce.so (``nccl=True``: libslimreduce_nccl.so,
    which only CUDA builds make; ``mpich=True``: libslimreduce-mpich.so, for
    the MPICH family's MPI), as an absolute path.

    Raises FileNotFoundError, naming the folders looked in, when it is not there.
    """
    name = NCCL_LIBRARY if nccl else MPICH_LIBRARY if mpich else LIBRARY
    dirs = _library_dirs()
    for folder in dirs:
        candidate = folder / name
        if candidate.is_file():
            return str(candidate)
    looked = ", ".join(str(d) for d in dirs)
    hint = (" (a CUDA build makes it)" if nccl else
            " (a build with -DSLIMREDUCE_MPI_ABI=mpich makes it)" if mpich else "")
    raise FileNotFoundError(f"{name} is not installed next to this package{hint}; looked in {looked}")


def libraries() -> dict:
    """The installed libraries, each as an absolute path, keyed by what it
    serves: "openmpi" (libslimreduce.so), "mpich" (libslimreduce-mpich.so),
    "nccl" (libslimreduce_nccl.so); only those installed, in that order."""
    found = {}
    for key, options in (("openmpi", {}), ("mpich", {"mpich": True}), ("nccl", {"nccl": True})):
        try:
            found[key] = library_path(**options)
        except FileNotFoundError:
            continue
    return found


def mpi_abis() -> list:
    """The MPI ABIs with a library installed, the default first: ["openmpi",
    "mpich"], ["openmpi"], ["mpich"] or []."""
    installed = libraries()
    return [abi for abi in MPI_ABIS.values() if abi in installed]


def mpi_abi() -> str:
    """The default MPI library's ABI: "openmpi" where libslimreduce.so is
    installed, else "mpich" (an install of the MPICH build alone). Raises
    FileNotFoundError when no MPI library is installed (an NCCL-only build)."""
    abis = mpi_abis()
    if not abis:
        looked = ", ".join(str(d) for d in _library_dirs())
        raise FileNotFoundError(f"neither {LIBRARY} nor {MPICH_LIBRARY} is installed next to this "
                                f"package; looked in {looked}")
    return abis[0]


# ---- the C API of the loaded library --------------------------------------------------------


class _Counters(ctypes.Structure):
    _fields_ = [
        ("intercepted", ctypes.c_uint64),
        ("compressed", ctypes.c_uint64),
        ("passed_through", ctypes.c_uint64),
        ("warmup", ctypes.c_uint64),
        ("ef_cap_fallback", ctypes.c_uint64),
        ("input_bytes", ctypes.c_uint64),
        ("wire_baseline", ctypes.c_double),
        ("wire_sent", ctypes.c_double),
        ("ef_resets", ctypes.c_uint64),
    ]


_handle = None


def _find_loaded():
    """The loaded library's handle, or None; never loads anything."""
    try:
        process = ctypes.CDLL(None)
        process.slimreduce_version  # noqa: B018 - the lookup is the test
        return process
    except (OSError, AttributeError):
        pass
    noload = getattr(os, "RTLD_NOLOAD", 4)
    for name in (LIBRARY, MPICH_LIBRARY, NCCL_LIBRARY):
        try:
            handle = ctypes.CDLL(name, mode=noload | ctypes.RTLD_GLOBAL)
            handle.slimreduce_version  # noqa: B018
            return handle
        except (OSError, AttributeError):
            continue
    return None


def _lib():
    global _handle
    if _handle is None:
        handle = _find_loaded()
        if handle is None:
            raise NotLoadedError(
                "SlimReduce is not loaded in this process: start the job with slimreduce-run, "
                "or with LD_PRELOAD=" + LIBRARY + " (slimreduce.library_path() names it)"
            )
        handle.slimreduce_version.restype = ctypes.c_char_p
        handle.slimreduce_version.argtypes = []
        handle.slimreduce_get_counters.argtypes = [ctypes.POINTER(_Counters)]
        handle.slimreduce_get_counters.restype = ctypes.c_int
        handle.slimreduce_get_counter.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_double)]
        handle.slimreduce_get_counter.restype = ctypes.c_int
        handle.slimreduce_compressor.argtypes = []
        handle.slimreduce_compressor.restype = ctypes.c_char_p
        handle.slimreduce_set_compressor.argtypes = [ctypes.c_char_p]
        handle.slimreduce_set_compressor.restype = ctypes.c_int
        handle.slimreduce_set_topk_ratio.argtypes = [ctypes.c_double]
        handle.slimreduce_set_topk_ratio.restype = ctypes.c_int
        handle.slimreduce_get_setting.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        handle.slimreduce_get_setting.restype = ctypes.c_int
        _handle = handle
    return _handle


def is_loaded() -> bool:
    """Whether libslimreduce.so (or libslimreduce_nccl.so) is loaded in this process."""
    try:
        _lib()
        return True
    except NotLoadedError:
        return False


def version() -> str:
    """The loaded library's version, "major.minor.patch"."""
    return _lib().slimreduce_version().decode()


def counters() -> dict:
    """This rank's counters so far (MPI and NCCL calls together), as a dict
    with the fields of slimreduce_counters: intercepted, compressed,
    passed_through, warmup, ef_cap_fallback, input_bytes, wire_baseline,
    wire_sent, ef_resets."""
    out = _Counters()
    if _lib().slimreduce_get_counters(ctypes.byref(out)) != 0:
        raise SlimReduceError("slimreduce_get_counters failed: the runtime is not up (before MPI_Init?)")
    return {name: getattr(out, name) for name, _ in _Counters._fields_}


def counter(key: str) -> float:
    """One counter by its report key ("calls.compressed", "bytes.wire_sent", "savings", ...)."""
    value = ctypes.c_double()
    if _lib().slimreduce_get_counter(key.encode(), ctypes.byref(value)) != 0:
        raise SlimReduceError(f"no counter {key!r} (or the runtime is not up)")
    return value.value


def compressor() -> str:
    """The compressor in effect ("none", "fp16", "bf16", "topk")."""
    name = _lib().slimreduce_compressor()
    if name is None:
        raise SlimReduceError("the runtime is not up (before MPI_Init?)")
    return name.decode()


def set_compressor(name: str) -> None:
    """Switches the compressor and drops every error-feedback residual. Every
    rank must call it at the same point of its calls (slimreduce.h)."""
    if _lib().slimreduce_set_compressor(name.encode()) != 0:
        raise SlimReduceError(f"cannot switch to compressor {name!r}: unknown, or the runtime is not up")


def set_topk_ratio(ratio: float) -> None:
    """Sets the top-k ratio (0 < ratio <= 1), on every rank at the same point."""
    if _lib().slimreduce_set_topk_ratio(float(ratio)) != 0:
        raise SlimReduceError(f"cannot set the top-k ratio to {ratio!r}: out of (0, 1], or the runtime is not up")


def setting(name: str) -> str:
    """The effective value of one setting ("SLIMREDUCE_MIN_BYTES"), as the INFO log shows it."""
    size = 256
    while True:
        buffer = ctypes.create_string_buffer(size)
        if _lib().slimreduce_get_setting(name.encode(), buffer, size) == 0:
            return buffer.value.decode()
        if size >= 1 << 16:
            raise SlimReduceError(f"no setting {name!r} (or the runtime is not up)")
        size *= 16  # a long value (a report path): try a larger buffer


def settings() -> dict:
    """Every setting's effective value, by name."""
    return {name: setting(name) for name in SETTING_NAMES}
