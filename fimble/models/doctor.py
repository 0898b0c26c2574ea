"""The checks behind ``fimble doctor``: can this machine serve completions, and if not, why.

Each check is a function returning a ``CheckResult``; the facts it judges (``/proc/cpuinfo`` text,
memory numbers) can be passed in, so the judgement is testable without the machine. A ``fail``
blocks serving and always carries the one command that fixes it; ``warn`` means it will work,
but slowly or tightly.
"""

from __future__ import annotations

import contextlib
import os
import platform
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from fimble import paths
from fimble.errors import ModelCorrupt, ModelError, ModelNotFound
from fimble.models import cpu_path
from fimble.models.cpu_path import LLAMA_CPP_PIN

__all__ = [
    "CheckResult",
    "CpuInfo",
    "Status",
    "check_cpu",
    "check_cpu_path",
    "check_disk",
    "check_fim",
    "check_llama_cpp",
    "check_memory",
    "check_model",
    "check_threads",
    "has_blocker",
    "parse_cpuinfo",
    "run_checks",
]

Status = Literal["ok", "warn", "fail", "skip"]
# A loaded model takes about 1.2-1.5x its file size (weights + compute buffers), plus the KV cache.
MEMORY_FACTOR_LOW, MEMORY_FACTOR_HIGH = 1.2, 1.5
_X86_FLAGS = (
    "sse3", "ssse3", "avx", "avx2", "fma", "f16c", "avx_vnni",
    "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512vbmi",
)  # fmt: skip
_ARM_FLAGS = {"asimd": "neon", "asimdhp": "neon-fp16", "asimddp": "dotprod", "sve": "sve", "i8mm": "i8mm"}


@dataclass(frozen=True)
class CheckResult:
    name: str
    status: Status
    summary: str
    fix: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self) | {"data": dict(self.data)}


def has_blocker(results: Sequence[CheckResult]) -> bool:
    """True when some check failed, i.e. ``fimble`` cannot serve completions as things stand."""
    return any(r.status == "fail" for r in results)


def _gib(n: float) -> str:
    return f"{n / 2**30:.1f} GiB"


@dataclass(frozen=True)
class CpuInfo:
    physical: int | None
    logical: int | None
    flags: tuple[str, ...]
    model: str = ""


def parse_cpuinfo(text: str) -> CpuInfo:
    """Cores and SIMD flags from ``/proc/cpuinfo`` text (x86 ``flags`` or ARM ``Features``)."""
    flags: set[str] = set()
    cores: set[tuple[str, str]] = set()
    logical = 0
    model = ""
    phys_id = core_id = ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key, value = key.strip().lower(), value.strip()
        if key == "processor":
            logical += 1
        elif key == "physical id":
            phys_id = value
        elif key == "core id":
            core_id = value
            cores.add((phys_id, core_id))
        elif key in ("model name", "hardware") and not model:
            model = value
        elif key == "flags":
            names = {"pni" if f == "sse3" else f: f for f in _X86_FLAGS}  # the kernel says pni for SSE3
            flags.update(names[f] for f in value.split() if f in names)
        elif key == "features":
            flags.update(_ARM_FLAGS[f] for f in value.split() if f in _ARM_FLAGS)
    ordered = tuple(f for f in (*_X86_FLAGS, *_ARM_FLAGS.values()) if f in flags)
    return CpuInfo(len(cores) or None, logical or None, ordered, model)


def _machine_cpu() -> CpuInfo:
    text = ""
    with contextlib.suppress(OSError):
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    parsed = parse_cpuinfo(text)
    try:
        import psutil

        physical = psutil.cpu_count(logical=False) or parsed.physical
        logical = psutil.cpu_count(logical=True) or parsed.logical
    except ImportError:  # pragma: no cover - psutil is a dependency
        physical, logical = parsed.physical, parsed.logical or os.cpu_count()
    flags = parsed.flags
    if not flags and platform.machine().lower() in ("arm64", "aarch64"):
        flags = ("neon",)  # every 64-bit ARM has NEON; macOS has no /proc/cpuinfo
    return CpuInfo(physical or logical, logical, flags, parsed.model or platform.processor())


def check_cpu(cpu: CpuInfo | None = None) -> CheckResult:
    cpu = cpu or _machine_cpu()
    simd = " ".join(cpu.flags) or "none detected"
    summary = f"{cpu.physical or '?'} physical / {cpu.logical or '?'} logical cores; SIMD: {simd}"
    data = {"physical": cpu.physical, "logical": cpu.logical, "flags": list(cpu.flags), "model": cpu.model}
    x86 = any(f in cpu.flags for f in ("sse3", "avx"))
    if x86 and "avx2" not in cpu.flags:
        return CheckResult(
            "cpu",
            "warn",
            summary + " (no AVX2: completions will be slow)",
            "use the small model: `fimble models pull qwen2.5-coder-0.5b`",
            data,
        )
    return CheckResult("cpu", "ok", summary, None, data)


def check_threads(cpu: CpuInfo | None = None) -> CheckResult:
    """llama.cpp runs best with one thread per physical core (hyperthreads add little)."""
    cpu = cpu or _machine_cpu()
    n = cpu.physical or cpu.logical or 1
    return CheckResult(
        "threads", "ok", f"recommended threads: {n} (= physical cores)", None, {"recommended": n}
    )


def check_memory(
    model_bytes: int | None,
    kv_bytes: int | None,
    total: int | None = None,
    available: int | None = None,
    model_name: str = "the model",
) -> CheckResult:
    if total is None or available is None:
        import psutil

        vm = psutil.virtual_memory()
        total, available = vm.total, vm.available
    data: dict[str, Any] = {"total": total, "available": available}
    have = f"{_gib(total)} total, {_gib(available)} available"
    if model_bytes is None:
        return CheckResult("memory", "ok", have, None, data)
    kv = kv_bytes or 0
    low = int(model_bytes * MEMORY_FACTOR_LOW) + kv
    high = int(model_bytes * MEMORY_FACTOR_HIGH) + kv
    data |= {"need_low": low, "need_high": high, "kv_cache": kv}
    kv_note = f"incl. {_gib(kv)} KV cache" if kv_bytes is not None else "plus its KV cache"
    need = f"{model_name} needs about {_gib(low)}-{_gib(high)} ({kv_note})"
    if total < low:
        fix = "use the small model: `fimble models pull qwen2.5-coder-0.5b` and `--model qwen2.5-coder-0.5b`"
        return CheckResult("memory", "fail", f"{have}; {need}", fix, data)
    if available < high:
        return CheckResult(
            "memory", "warn", f"{have}; {need}", "close memory-hungry programs before starting fimble", data
        )
    return CheckResult("memory", "ok", f"{have}; {need}", None, data)


def check_disk(directory: Path | None = None, need_bytes: int = 0, why: str = "") -> CheckResult:
    directory = directory or paths.models_root()
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free = shutil.disk_usage(probe).free
    data = {"path": str(directory), "free": free, "need": need_bytes}
    summary = f"{_gib(free)} free in {directory}"
    if need_bytes and free < need_bytes:
        return CheckResult(
            "disk",
            "fail",
            f"{summary}; {why} needs {_gib(need_bytes)}",
            "free some disk space, or set FIMBLE_HOME to a directory on a bigger disk",
            data,
        )
    if free < 1 << 30:
        return CheckResult("disk", "warn", summary + " (under 1 GiB)", "free some disk space", data)
    return CheckResult("disk", "ok", summary, None, data)


def check_llama_cpp(importer: Callable[[], Any] | None = None) -> CheckResult:
    """Import llama_cpp (inside the check: it loads a large native library)."""
    fix = f"pip install 'llama-cpp-python=={LLAMA_CPP_PIN}' (or `make install` in a checkout)"
    try:
        module = importer() if importer else __import__("llama_cpp")
    except (ImportError, OSError) as err:
        return CheckResult("llama-cpp", "fail", f"llama_cpp cannot be imported ({err})", fix)
    version = str(getattr(module, "__version__", "unknown"))
    data = {"version": version, "pinned": LLAMA_CPP_PIN}
    if version != LLAMA_CPP_PIN:
        return CheckResult(
            "llama-cpp",
            "warn",
            f"llama-cpp-python {version} (fimble is tested with {LLAMA_CPP_PIN})",
            fix,
            data,
        )
    return CheckResult("llama-cpp", "ok", f"llama-cpp-python {version}", None, data)


def check_cpu_path(
    name_or_path: str, on_probe: Callable[[str], None] | None = None, reprobe: bool = False
) -> CheckResult:
    """How llama.cpp runs on this CPU with this model: the verdict of the probe the engine uses too."""
    from fimble.models.store import resolve

    try:
        path = resolve(name_or_path, verify=False)
    except ModelError:
        return CheckResult("cpu-path", "skip", "not probed: the model is missing")
    verdict = cpu_path.verdict_for(path, on_probe=on_probe, reprobe=reprobe)
    data = verdict.to_json()
    if verdict.path is None:
        return CheckResult("cpu-path", "fail", verdict.summary(), cpu_path.REBUILD, data)
    if not verdict.settled:
        fix = "see the detail above; `fimble doctor --reprobe` probes again"
        return CheckResult("cpu-path", "warn", verdict.summary(), fix, data)
    if verdict.path is cpu_path.CpuPath.PLAIN and not verdict.faster:
        fix = f"completions work at about half the speed; a rebuild may restore repacking: {cpu_path.REBUILD}"
        return CheckResult("cpu-path", "warn", verdict.summary(), fix, data)
    return CheckResult("cpu-path", "ok", verdict.summary(), None, data)


def check_model(name_or_path: str) -> CheckResult:
    """Present and verified (cheaply, against the ``.verified`` record)."""
    from fimble.models.store import resolve

    try:
        path = resolve(name_or_path, verify=True)
    except ModelNotFound as err:
        return CheckResult(
            "model", "fail", f"{name_or_path} is missing", _command_in(err), {"name": name_or_path}
        )
    except ModelCorrupt as err:
        return CheckResult(
            "model", "fail", f"{name_or_path} is corrupt", _command_in(err), {"name": name_or_path}
        )
    size = path.stat().st_size
    return CheckResult(
        "model",
        "ok",
        f"{name_or_path} present and verified ({_gib(size)}, {path})",
        None,
        {"name": name_or_path, "path": str(path), "size": size},
    )


def check_fim(name_or_path: str) -> CheckResult:
    from fimble.models.store import info

    try:
        meta = info(name_or_path)
    except ModelError as err:
        return CheckResult("fim", "skip", f"not checked: {err}")
    fim = meta.fim
    data = {"family": fim.family, "ids": fim.ids(), "texts": dict(fim.texts)}
    if not fim.complete:
        return CheckResult(
            "fim",
            "fail",
            f"{name_or_path} has no FIM tokens ({', '.join(fim.missing)} missing)",
            "use a FIM-capable code model: `fimble models pull qwen2.5-coder-1.5b`",
            data,
        )
    ids = ", ".join(f"{role}={i}" for role, i in fim.ids().items())
    return CheckResult("fim", "ok", f"FIM tokens ({fim.family or 'metadata'}): {ids}", None, data)


def _command_in(err: Exception) -> str:
    """The backticked command in an error message (they all name their fix), else the message."""
    match = re.search(r"`([^`]+)`", str(err))
    return match.group(1) if match else str(err)


def run_checks(
    model: str | None = None,
    n_ctx: int = 4096,
    on_probe: Callable[[str], None] | None = None,
    reprobe: bool = False,
) -> list[CheckResult]:
    """Every doctor check for ``model`` (default model if None) with a ``n_ctx``-token KV cache.

    ``on_probe(path)`` is called before each CPU-path probe child (none when the verdict is known).
    """
    from fimble.models import registry
    from fimble.models.layout import is_path_like, model_path, spec_or_none
    from fimble.models.store import info

    name = model or registry.default_name()
    spec = None if is_path_like(name) else spec_or_none(name)
    cpu = _machine_cpu()
    results = [check_cpu(cpu)]

    model_bytes = kv = None
    try:
        meta = info(name)
        model_bytes = meta.path.stat().st_size
        kv = meta.kv_cache_bytes(n_ctx)
    except ModelError:
        model_bytes = spec.size if spec else None
    results.append(check_memory(model_bytes, kv, model_name=name))

    need, why = 0, ""
    if spec is not None and not model_path(name).exists():
        per_part = spec.size // (spec.pypi.parts if spec.pypi else 1)
        need, why = spec.size + 3 * per_part, f"pulling {name}"
    results.append(check_disk(paths.models_root(), need, why))
    results.append(check_model(name))
    results.append(check_fim(name))
    # The probe runs llama.cpp in a child first: importing a build that cannot run here could kill us.
    results.append(path_check := check_cpu_path(name, on_probe, reprobe))
    if path_check.status == "fail":
        results.append(CheckResult("llama-cpp", "skip", "not imported: it crashes on this CPU"))
    else:
        results.append(check_llama_cpp())
    results.append(check_threads(cpu))
    return results
