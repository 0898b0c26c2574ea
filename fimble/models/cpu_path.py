"""Which CPU path llama.cpp may take on this machine, decided by a probe in a child process.

A llama.cpp compiled natively uses what the CPU advertises, and a machine can advertise what it cannot
run: on some virtual machines the CPU lists AMX and the kernel grants the permission, yet the first
tile instruction faults inside ggml's AMX buffer type and takes the whole process with it. A wheel
compiled on another CPU (pip's wheel cache) dies the same way with SIGILL. Neither can be caught in
the process that suffers it, so before a model is first loaded on a machine, one short decode runs in
a child (``fimble.models.cpu_probe``) for each path of the ladder, safest last:

    full     every extra buffer type the build offers (AMX if any, weight repacking)
    no-amx   repacking kept, the AMX buffer type left out
    plain    no extra buffer types (plain CPU buffers; about half the generation speed)

The first path whose child survives is the verdict. It is remembered under the fimble home, keyed by
what it depends on (the llama.cpp build, the CPU and kernel, the model file), so later starts pay
nothing; ``FIMBLE_CPU_PATH_DIR`` moves that record (tests share one per run), and ``FIMBLE_CPU_PATH``
forces a path without probing (benchmarks; a user who knows better). ``apply`` puts a verdict into
effect for the next model load of this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from fimble import paths
from fimble.errors import ConfigError
from fimble.models.locking import model_lock

__all__ = [
    "LADDER",
    "LLAMA_CPP_PIN",
    "REBUILD",
    "Attempt",
    "CpuPath",
    "Verdict",
    "apply",
    "apply_to_process",
    "decide",
    "extra_buffer_types",
    "probe_key",
    "verdict_for",
]

# Bump when the ladder or the probe changes, so verdicts recorded by an older fimble are probed again.
_PROBE_VERSION = 2
PROBE_TIMEOUT_S = 180.0  # a 1.5B model loads and decodes in seconds; minutes mean a hang
LLAMA_CPP_PIN = "0.3.36"  # the llama-cpp-python fimble is built and tested with
REBUILD = (
    "`make rebuild-llama` in a fimble checkout (or `pip install --force-reinstall --no-deps "
    f"--no-cache-dir --no-binary llama-cpp-python llama-cpp-python=={LLAMA_CPP_PIN}`)"
)
# The deaths a kernel the CPU cannot run ends in. Others say something else: SIGABRT a failed assert
# (a bad model file), SIGBUS a file truncated under its mapping, SIGKILL the OOM killer or a user.
_CPU_SIGNALS = {signal.SIGILL, signal.SIGSEGV, signal.SIGFPE}


class CpuPath(StrEnum):
    FULL = "full"
    NO_AMX = "no-amx"
    PLAIN = "plain"


LADDER = (CpuPath.FULL, CpuPath.NO_AMX, CpuPath.PLAIN)
# The request the surviving paths are timed on: a place the KV cache does not cover (hundreds of
# prompt tokens) and a line of output. Repacking speeds generation up but can slow prompt evaluation
# down (an AVX-512 EPYC with the 1.5B: 84 vs 120 prompt tok/s, 24 vs 19 generated, and the first
# suggestion at a new place 21.5 vs 15.2 s), so which path is faster depends on the machine and the
# model, and is measured. The child times batches of TIMED_PROMPT tokens (the rate hardly depends on
# the batch size past a hundred) and single tokens; a request weighed at 128 prompt tokens put the
# 1.5B's two paths within noise of each other.
REFERENCE_PROMPT, REFERENCE_GENERATE = 256, 16
TIMED_PROMPT = 128
# Plain replaces a repacking path only when it is this much faster: one child's timing is noisy.
FASTER_BY = 0.10
# Timings taken while other work keeps the cores busy (the 1-minute load average per core above this)
# say little about which path is faster: measured during a llama.cpp build, plain looked 6% faster
# (kept full), and 21% faster on the same machine once quiet. Such a verdict holds until a quiet start
# times the paths again.
BUSY_LOAD = 0.5
_AMX = "AMX"  # ggml's name for its AMX buffer type (ggml-cpu/amx/amx.cpp)


@dataclass(frozen=True)
class Attempt:
    """One probe child's fate on one path."""

    path: CpuPath
    outcome: str  # ok | crashed (a CPU fault) | timeout | error (an error exit, or another signal)
    signal: str = ""  # SIGSEGV, SIGILL ... when it died of one
    detail: str = ""  # the child's last words on stderr, for the log
    ms: float = 0.0
    prompt_tok_s: float = 0.0  # the child's speed on the reference request (one thread), when ok
    gen_tok_s: float = 0.0

    def request_s(self) -> float:
        """Seconds the reference request takes on this path: the cost the paths are compared by."""
        if self.prompt_tok_s <= 0 or self.gen_tok_s <= 0:
            return float("inf")
        return REFERENCE_PROMPT / self.prompt_tok_s + REFERENCE_GENERATE / self.gen_tok_s


@dataclass(frozen=True)
class Verdict:
    """The CPU path to load a model with, and how it was found."""

    path: CpuPath | None  # None: no path survives on this CPU (rebuild llama.cpp)
    extra_bufts: tuple[str, ...] = ()  # what the build offers, e.g. ("AMX", "CPU_REPACK")
    attempts: tuple[Attempt, ...] = ()
    llama_cpp: str = ""
    key: str = ""
    cached: bool = False  # read from the record: no probe ran this time
    settled: bool = True  # False: the probe could not tell (error, timeout); not recorded
    detail: str = ""  # why it is not settled
    faster: bool = False  # plain chosen over a repacking path that also runs, for its measured speed
    timed_load: float = 0.0  # load average per core when the paths were timed (0: not timed)

    @property
    def timed_busy(self) -> bool:
        """The paths were timed against each other on a busy machine: time them again when quiet."""
        return self.timed_load > BUSY_LOAD and len(self._timed()) > 1

    def summary(self) -> str:
        """One line for doctor, the status command and the log: which path, and why."""
        if self.path is None:
            return f"llama.cpp crashes on this CPU in every configuration ({self._failures()})"
        if self.path is CpuPath.PLAIN and self.faster:
            out = "plain: no extra buffer types; measured faster here"
            if crashed := self._failures():
                out += f" (crashed: {crashed})"
        elif self.path is CpuPath.PLAIN:
            out = f"plain: no extra buffer types, no weight repacking (crashed: {self._failures()})"
        elif self.path is CpuPath.NO_AMX:
            kept = ", ".join(b for b in self.extra_bufts if b != _AMX) or "none"
            out = f"no-amx: AMX advertised but not usable here: disabled; repacking kept ({kept})"
        else:
            out = f"full: extra buffer types {', '.join(self.extra_bufts) or 'none in this build'}"
        if timings := self._timings():
            out += f"; a {REFERENCE_PROMPT}-token prompt and {REFERENCE_GENERATE} tokens take {timings}"
        if self.timed_busy:
            out += f" (timed while busy, load {self.timed_load:.1f} per core: timed again at a quiet start)"
        return out if self.settled else f"{out}; not settled ({self.detail or self._failures()})"

    def _timings(self) -> str:
        """The reference request's time on each path that ran it, e.g. ``plain 3.7 s, full 4.4 s``."""
        return ", ".join(f"{a.path} {a.request_s():.1f} s" for a in self._timed())

    def _timed(self) -> list[Attempt]:
        return [a for a in self.attempts if a.outcome == "ok" and a.request_s() < float("inf")]

    def _failures(self) -> str:
        return ", ".join(f"{a.path}: {a.signal or a.outcome}" for a in self.attempts if a.outcome != "ok")

    def problem(self) -> str:
        """The error to show when no path survives: what happened and the one command that fixes it."""
        illegal = any(a.signal == "SIGILL" for a in self.attempts)
        why = (
            "it was compiled for a CPU with instructions this one lacks (a wheel built elsewhere)"
            if illegal
            else "the build does not run on this CPU"
        )
        return f"{self.summary()}: {why}. Rebuild it for this machine: {REBUILD}."

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        del out["cached"]  # true of every verdict read back
        out["path"] = str(self.path) if self.path else None
        out["attempts"] = [asdict(a) | {"path": str(a.path)} for a in self.attempts]
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Verdict:
        return cls(
            path=CpuPath(data["path"]) if data.get("path") else None,
            extra_bufts=tuple(data.get("extra_bufts", ())),
            attempts=tuple(Attempt(**(a | {"path": CpuPath(a["path"])})) for a in data.get("attempts", ())),
            llama_cpp=data.get("llama_cpp", ""),
            key=data.get("key", ""),
            faster=bool(data.get("faster", False)),
            timed_load=float(data.get("timed_load", 0.0)),
            cached=True,
        )


def decide(try_path: Callable[[CpuPath], tuple[Attempt, Sequence[str]]]) -> Verdict:
    """Walk the ladder with ``try_path`` (one probe child per path) and return the verdict.

    ``try_path`` returns the attempt and the extra buffer types the build offers (the child reports
    them when it gets that far). ``no-amx`` is tried only when the build has an AMX buffer type:
    otherwise it is ``full`` again. Only a CPU fault moves down the ladder. An error stops the walk
    unsettled — the real load will report the real problem (a corrupt file, no memory); a timeout
    moves on but leaves the verdict unsettled, so a busy machine's slow child is probed again later.

    When a repacking path survives, plain runs too, and wins if the reference request is at least
    ``FASTER_BY`` faster on it: surviving is the first question, speed the second.
    """
    attempts: list[Attempt] = []
    offered: tuple[str, ...] = ()
    settled = True
    for path in LADDER:
        if path is CpuPath.NO_AMX and offered and _AMX not in offered:
            continue
        attempt, bufts = try_path(path)
        offered = tuple(bufts) or offered
        attempts.append(attempt)
        if attempt.outcome == "ok":
            if path is CpuPath.PLAIN:
                return Verdict(path, offered, tuple(attempts), settled=settled)
            plain, _ = try_path(CpuPath.PLAIN)
            attempts.append(plain)
            faster = plain.outcome == "ok" and plain.request_s() < attempt.request_s() * (1 - FASTER_BY)
            chosen = CpuPath.PLAIN if faster else path
            return Verdict(chosen, offered, tuple(attempts), settled=settled, faster=faster)
        if attempt.outcome == "error":
            return Verdict(CpuPath.FULL, offered, tuple(attempts), settled=False, detail=attempt.detail)
        if attempt.outcome == "timeout":
            settled = False
    return Verdict(None, offered, tuple(attempts), settled=settled)


# -- the record ------------------------------------------------------------------------------------


def _verdict_dir() -> Path:
    env = os.environ.get("FIMBLE_CPU_PATH_DIR")
    return Path(env).expanduser() if env else paths.cache_root() / "cpu-path"


def _llama_build() -> dict[str, Any]:
    """The installed llama.cpp build, without importing it (an import can already die of SIGILL)."""
    out: dict[str, Any] = {"version": ""}
    with contextlib.suppress(importlib.metadata.PackageNotFoundError):
        out["version"] = importlib.metadata.version("llama-cpp-python")
    spec = importlib.util.find_spec("llama_cpp")
    if spec is not None and spec.origin:
        lib = Path(spec.origin).parent / "lib"
        with contextlib.suppress(OSError):
            out["libs"] = sorted(
                (p.name, st.st_size, st.st_mtime_ns)
                for p in lib.iterdir()
                if p.is_file() and not p.is_symlink() and (st := p.stat())
            )
    return out


def _cpu_identity() -> dict[str, str]:
    """What the CPU says it can do (every flag, not only the SIMD ones doctor shows) and the kernel."""
    out = {"machine": platform.machine(), "kernel": platform.release(), "processor": platform.processor()}
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            key, _, value = line.partition(":")
            key = key.strip().lower()
            if key in ("flags", "features", "model name") and key not in out:
                out[key] = " ".join(sorted(value.split())) if key != "model name" else value.strip()
    return out


def _model_identity(model: Path) -> dict[str, Any]:
    st = model.stat()
    return {"path": str(model.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}


def probe_key(model: Path) -> str:
    """A digest of everything a verdict depends on; any change to one of them probes again."""
    facts = {
        "probe": _PROBE_VERSION,
        "llama": _llama_build(),
        "cpu": _cpu_identity(),
        "model": _model_identity(model),
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:24]


def load_per_core() -> float:
    """The 1-minute load average per logical core (0 where the system does not tell)."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return 0.0


def _read(record: Path) -> Verdict | None:
    try:
        return Verdict.from_json(json.loads(record.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # missing or unreadable: probe again


def _write(record: Path, verdict: Verdict) -> None:
    """Atomically (a torn record would only mean one more probe, but never a wrong verdict)."""
    with contextlib.suppress(OSError):  # a read-only or full home: the verdict still holds for this run
        record.parent.mkdir(parents=True, exist_ok=True)
        tmp = record.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(verdict.to_json(), indent=1), encoding="utf-8")
        os.replace(tmp, record)


# -- the probe child -------------------------------------------------------------------------------

_memo: dict[str, Verdict] = {}
_memo_lock = threading.Lock()


def _threads() -> int:
    """The engine's default: physical cores (``fimble.completion.engine.default_threads``)."""
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except ImportError:  # pragma: no cover - psutil is a dependency
        return max(1, os.cpu_count() or 1)


def _run_child(model: Path, path: CpuPath) -> tuple[Attempt, list[str]]:
    """One probe: ``python -m fimble.models.cpu_probe MODEL PATH`` and how it ended."""
    started = time.perf_counter()
    cmd = [sys.executable, "-m", "fimble.models.cpu_probe", str(model), str(path), str(_threads())]
    try:
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        ms = (time.perf_counter() - started) * 1000
        return Attempt(path, "timeout", detail=f"no answer in {PROBE_TIMEOUT_S:.0f} s", ms=ms), []
    ms = round((time.perf_counter() - started) * 1000, 1)
    report: dict[str, Any] = {}
    for line in reversed(done.stdout.splitlines()):
        with contextlib.suppress(ValueError):
            report = json.loads(line)
            break
    bufts = [str(b) for b in report.get("extra_bufts", ())]
    last = " | ".join(done.stderr.strip().splitlines()[-3:])[-400:]
    if done.returncode == 0 and report.get("ok"):
        speed = {k: float(report.get(k, 0.0)) for k in ("prompt_tok_s", "gen_tok_s")}
        return Attempt(path, "ok", ms=ms, **speed), bufts
    if done.returncode < 0:
        sig = signal.Signals(-done.returncode)
        outcome = "crashed" if sig in _CPU_SIGNALS else "error"
        return Attempt(path, outcome, sig.name, last or f"died of {sig.name}", ms), bufts
    return Attempt(path, "error", detail=last or f"exit status {done.returncode}", ms=ms), bufts


def verdict_for(
    model: str | Path,
    run: Callable[[Path, CpuPath], tuple[Attempt, Sequence[str]]] | None = None,
    on_probe: Callable[[str], None] | None = None,
    reprobe: bool = False,
) -> Verdict:
    """The CPU path for loading ``model`` here: remembered, or probed now (a few seconds, once).

    Concurrent callers wait for one probe (a file lock) and then read its record. ``run`` replaces
    the child (tests); ``on_probe(path)`` is told before each child starts, for a progress line;
    ``reprobe`` ignores what is remembered (``fimble doctor --reprobe``).
    """
    model = Path(model)
    if forced := os.environ.get("FIMBLE_CPU_PATH", "").strip():
        try:
            return Verdict(CpuPath(forced), settled=False, detail="forced by FIMBLE_CPU_PATH")
        except ValueError:
            choices = ", ".join(LADDER)
            raise ConfigError(f"FIMBLE_CPU_PATH={forced!r} is not a CPU path: use one of {choices}") from None
    try:
        key = probe_key(model)
    except OSError as err:  # no model file: nothing to probe; the load reports the missing file
        return Verdict(CpuPath.FULL, settled=False, detail=str(err))
    with _memo_lock:
        if key in _memo and not reprobe:
            return _memo[key]
    record = _verdict_dir() / f"{key}.json"
    with model_lock(_verdict_dir() / ".probe.lock"):
        verdict = None if reprobe else _read(record)
        load = load_per_core()
        if verdict is not None and verdict.timed_busy and load <= BUSY_LOAD:
            verdict = None  # timed while busy, and quiet now: which path is faster, measured again
        if verdict is None:
            probe = run or _run_child

            def attempt(path: CpuPath) -> tuple[Attempt, Sequence[str]]:
                if on_probe is not None:
                    on_probe(str(path))
                return probe(model, path)

            verdict = decide(attempt)
            verdict = dataclasses.replace(
                verdict, key=key, llama_cpp=_llama_build()["version"], timed_load=round(load, 2)
            )
            if verdict.settled:
                _write(record, verdict)
    with _memo_lock:
        _memo[key] = verdict
    return verdict


# -- putting a verdict into effect -----------------------------------------------------------------

_bufts_lock = threading.Lock()
_original: list[int] | None = None  # the build's extra buffer types, before any path was applied


def _extra_bufts_array() -> tuple[Any, Any]:
    """The CPU device's NULL-terminated list of extra buffer types, as llama.cpp reads it per load.

    ggml hands it out through the device's ``ggml_backend_dev_get_extra_bufts`` (a pointer into a
    static array that ``make_cpu_buft_list`` walks whenever a model loads), so leaving an entry out
    of that array leaves it out of every later load, exactly as if the build had none.
    """
    from llama_cpp import _ggml  # the ggml library llama_cpp loaded (the caller imported llama_cpp)

    lib = _ggml.libggml
    lib.ggml_backend_dev_by_type.restype = ctypes.c_void_p
    lib.ggml_backend_dev_by_type.argtypes = [ctypes.c_int]
    lib.ggml_backend_dev_backend_reg.restype = ctypes.c_void_p
    lib.ggml_backend_dev_backend_reg.argtypes = [ctypes.c_void_p]
    lib.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
    lib.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.ggml_backend_buft_name.restype = ctypes.c_char_p
    lib.ggml_backend_buft_name.argtypes = [ctypes.c_void_p]
    dev = lib.ggml_backend_dev_by_type(0)  # GGML_BACKEND_DEVICE_TYPE_CPU
    reg = lib.ggml_backend_dev_backend_reg(dev) if dev else None
    addr = lib.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_dev_get_extra_bufts") if reg else None
    if not addr:
        return lib, None
    get = ctypes.CFUNCTYPE(ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)(addr)
    return lib, get(dev)


def _original_bufts(array: Any) -> list[int]:
    global _original
    if _original is None:
        _original = []
        while array[len(_original)]:
            _original.append(array[len(_original)])
    return _original


def extra_buffer_types() -> list[str]:
    """The names of the extra buffer types this build offers (before any path left one out)."""
    with _bufts_lock:
        lib, array = _extra_bufts_array()
        if array is None:
            return []
        return [lib.ggml_backend_buft_name(b).decode() for b in _original_bufts(array)]


def apply(mparams: Any, path: CpuPath) -> None:
    """Make the next ``llama_model_load_from_file(..., mparams)`` of this process take ``path``.

    Call it after ``import llama_cpp``; loads are serialized here, as the array is process-wide.
    """
    mparams.use_extra_bufts = path is not CpuPath.PLAIN
    with _bufts_lock:
        lib, array = _extra_bufts_array()
        if array is None:
            return
        original = _original_bufts(array)
        keep = [b for b in original if path is CpuPath.FULL or lib.ggml_backend_buft_name(b).decode() != _AMX]
        for i, buft in enumerate(keep):
            array[i] = buft
        array[len(keep)] = None  # the array's own terminator slot follows the originals: room enough


def apply_to_process(path: CpuPath) -> None:
    """Make every later model load of this process take ``path``, also by loaders fimble does not
    own (llama-cpp-python's ``Llama`` and its OpenAI-compatible server, in benchmarks and tests)."""
    import llama_cpp
    import llama_cpp.llama_cpp as low

    apply(llama_cpp.llama_model_default_params(), path)  # the array part is process-wide already
    if path is CpuPath.PLAIN and not getattr(low.llama_model_default_params, "_fimble_plain", False):
        default = low.llama_model_default_params

        def plain_params() -> Any:
            params = default()
            params.use_extra_bufts = False
            return params

        plain_params._fimble_plain = True  # type: ignore[attr-defined]
        low.llama_model_default_params = plain_params
        llama_cpp.llama_model_default_params = plain_params
