"""The CPU-path probe: the ladder's decisions, the remembered verdict and its key, and real children
that die by a signal (``FIMBLE_PROBE_CRASH``) on the way to a path that works."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from fimble.models import cpu_path
from fimble.models.cpu_path import Attempt, CpuPath, Verdict, decide, verdict_for
from tests.model_paths import SMALL, model_path


@pytest.fixture(autouse=True)
def fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Each test its own record directory and an empty in-process memo."""
    monkeypatch.setenv("FIMBLE_CPU_PATH_DIR", str(tmp_path / "cpu-path"))
    monkeypatch.setattr(cpu_path, "_memo", {})
    monkeypatch.setattr(cpu_path, "load_per_core", lambda: 0.0)  # a quiet machine, unless a test says
    yield tmp_path / "cpu-path"


def attempt(path: CpuPath, spec: str) -> Attempt:
    """``spec``: "ok@2.0" (survives; the reference request takes 2.0 s), "crashed:SIGSEGV", "error",
    "timeout"."""
    outcome, _, rest = spec.partition(":")
    if outcome.startswith("ok"):
        seconds = float(outcome.partition("@")[2] or 2.0)
        half = seconds / 2  # as much time on the prompt as on the generated tokens
        speed = {
            "prompt_tok_s": cpu_path.REFERENCE_PROMPT / half,
            "gen_tok_s": cpu_path.REFERENCE_GENERATE / half,
        }
        return Attempt(path, "ok", **speed)
    return Attempt(path, outcome, rest)


def ladder(outcomes: dict[CpuPath, str], offered: Sequence[str] = ("AMX", "CPU_REPACK")):  # type: ignore[no-untyped-def]
    """A probe that ends each path as ``outcomes`` says (see ``attempt``)."""
    tried: list[CpuPath] = []

    def run(path: CpuPath) -> tuple[Attempt, Sequence[str]]:
        tried.append(path)
        return attempt(path, outcomes[path]), offered

    return run, tried


FULL, NO_AMX, PLAIN = CpuPath.FULL, CpuPath.NO_AMX, CpuPath.PLAIN
BOTH, REPACK = ("AMX", "CPU_REPACK"), ("CPU_REPACK",)


@pytest.mark.parametrize(
    ("outcomes", "offered", "path", "tried", "settled"),
    [
        # A machine that runs everything: full, unless plain is clearly faster there.
        ({FULL: "ok@2", PLAIN: "ok@2"}, REPACK, FULL, ["full", "plain"], True),
        ({FULL: "ok@2", PLAIN: "ok@1.9"}, REPACK, FULL, ["full", "plain"], True),  # 5%: noise
        ({FULL: "ok@2", PLAIN: "ok@1.5"}, REPACK, PLAIN, ["full", "plain"], True),
        ({FULL: "ok@2", PLAIN: "crashed:SIGSEGV"}, REPACK, FULL, ["full", "plain"], True),
        # AMX advertised but faulting: repacking kept, AMX left out.
        (
            {FULL: "crashed:SIGSEGV", NO_AMX: "ok@2", PLAIN: "ok@3"},
            BOTH,
            NO_AMX,
            ["full", "no-amx", "plain"],
            True,
        ),
        # Repacking itself faults: plain buffers.
        (
            {FULL: "crashed:SIGSEGV", NO_AMX: "crashed:SIGSEGV", PLAIN: "ok"},
            BOTH,
            PLAIN,
            ["full", "no-amx", "plain"],
            True,
        ),
        # No AMX in the build: no-amx would be full again, so it is skipped.
        ({FULL: "crashed:SIGILL", PLAIN: "ok"}, REPACK, PLAIN, ["full", "plain"], True),
        # Nothing runs (a wheel compiled for another CPU): no path, and that is settled.
        ({FULL: "crashed:SIGILL", PLAIN: "crashed:SIGILL"}, REPACK, None, ["full", "plain"], True),
        # An error is not the CPU's doing: stop, load as usual, probe again next time.
        ({FULL: "error"}, REPACK, FULL, ["full"], False),
        # A hang moves on, but the verdict is not trusted for later starts.
        ({FULL: "timeout", NO_AMX: "ok@2", PLAIN: "ok@3"}, BOTH, NO_AMX, ["full", "no-amx", "plain"], False),
    ],
)
def test_the_ladder(
    outcomes: dict[CpuPath, str],
    offered: Sequence[str],
    path: CpuPath | None,
    tried: list[str],
    settled: bool,
) -> None:
    run, seen = ladder(outcomes, offered)
    verdict = decide(run)
    assert verdict.path is path
    assert [str(p) for p in seen] == tried
    assert verdict.settled is settled
    assert verdict.extra_bufts == tuple(offered)
    assert verdict.faster is (path is PLAIN and outcomes[FULL].startswith("ok"))


def test_summaries_say_what_was_found() -> None:
    no_amx = decide(ladder({FULL: "crashed:SIGSEGV", NO_AMX: "ok@2", PLAIN: "ok@3"})[0])
    assert no_amx.summary() == (
        "no-amx: AMX advertised but not usable here: disabled; repacking kept (CPU_REPACK); "
        "a 256-token prompt and 16 tokens take no-amx 2.0 s, plain 3.0 s"
    )
    plain = decide(ladder({FULL: "crashed:SIGILL", PLAIN: "ok"}, REPACK)[0])
    assert plain.summary().startswith("plain: no extra buffer types") and "full: SIGILL" in plain.summary()
    faster = decide(ladder({FULL: "ok@2", PLAIN: "ok@1.5"}, REPACK)[0])
    assert faster.summary().startswith("plain: no extra buffer types; measured faster here")
    assert faster.summary().endswith("take full 2.0 s, plain 1.5 s")
    dead = decide(ladder({FULL: "crashed:SIGILL", PLAIN: "crashed:SIGILL"}, REPACK)[0])
    assert "compiled for a CPU with instructions this one lacks" in dead.problem()
    assert "make rebuild-llama" in dead.problem() and "--no-cache-dir" in dead.problem()
    full = decide(ladder({FULL: "ok@2", PLAIN: "ok@2.5"}, REPACK)[0])
    assert full.summary().startswith("full: extra buffer types CPU_REPACK; a 256-token prompt")


def counting_probe(outcomes: dict[CpuPath, str]):  # type: ignore[no-untyped-def]
    calls: list[CpuPath] = []

    def run(model: Path, path: CpuPath) -> tuple[Attempt, Sequence[str]]:
        calls.append(path)
        return attempt(path, outcomes[path]), BOTH

    return run, calls


def test_the_verdict_is_remembered_until_what_it_depends_on_changes(
    tmp_path: Path, fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF" + b"\0" * 64)
    run, calls = counting_probe({FULL: "crashed:SIGSEGV", NO_AMX: "ok", PLAIN: "ok@3"})
    first = verdict_for(model, run=run)
    assert first.path is CpuPath.NO_AMX and not first.cached and calls == [FULL, NO_AMX, PLAIN]
    assert len(list(fresh.glob("*.json"))) == 1

    # A later start (a new process: no memo) reads the record and runs no child at all.
    monkeypatch.setattr(cpu_path, "_memo", {})
    again = verdict_for(model, run=lambda m, p: pytest.fail("probed although the verdict is known"))
    assert again.cached and again.path is CpuPath.NO_AMX and again.attempts == first.attempts

    # The model file changes: probe again.
    monkeypatch.setattr(cpu_path, "_memo", {})
    model.write_bytes(b"GGUF" + b"\1" * 80)
    calls.clear()
    assert verdict_for(model, run=run).path is CpuPath.NO_AMX and calls == [FULL, NO_AMX, PLAIN]

    # The CPU's flags change (another machine, same home): probe again.
    monkeypatch.setattr(cpu_path, "_memo", {})
    real = cpu_path._cpu_identity
    monkeypatch.setattr(cpu_path, "_cpu_identity", lambda: {**real(), "flags": "fpu sse2 amx_tile"})
    calls.clear()
    verdict_for(model, run=run)
    assert calls == [FULL, NO_AMX, PLAIN]

    # The llama.cpp build changes (a rebuild): probe again.
    monkeypatch.setattr(cpu_path, "_memo", {})
    build = cpu_path._llama_build
    monkeypatch.setattr(cpu_path, "_llama_build", lambda: {**build(), "libs": [["libggml-cpu.so", 1, 2]]})
    calls.clear()
    verdict_for(model, run=run)
    assert calls == [FULL, NO_AMX, PLAIN]

    # --reprobe ignores what is remembered.
    calls.clear()
    verdict_for(model, run=run, reprobe=True)
    assert calls == [FULL, NO_AMX, PLAIN]


def test_paths_timed_on_a_busy_machine_are_timed_again_at_a_quiet_start(
    tmp_path: Path, fresh: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timed while a build kept the cores busy, plain looked no faster; the verdict holds while the
    machine stays busy, and the first quiet start measures again."""
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    load = [1.0]
    monkeypatch.setattr(cpu_path, "load_per_core", lambda: load[0])
    run, calls = counting_probe({FULL: "ok@2", PLAIN: "ok@1.9"})
    busy = verdict_for(model, run=run)
    assert busy.path is FULL and busy.timed_busy and "timed while busy" in busy.summary()
    monkeypatch.setattr(cpu_path, "_memo", {})
    again = verdict_for(model, run=lambda m, p: pytest.fail("probed again while still busy"))
    assert again.cached and again.timed_busy
    monkeypatch.setattr(cpu_path, "_memo", {})
    load[0] = 0.1
    run, calls = counting_probe({FULL: "ok@2", PLAIN: "ok@1.5"})
    quiet = verdict_for(model, run=run)
    assert calls == [FULL, PLAIN] and quiet.path is PLAIN and not quiet.timed_busy
    # A path that only survives is not a speed comparison: a busy machine's verdict on it holds.
    assert not Verdict(
        PLAIN, attempts=(attempt(FULL, "crashed:SIGSEGV"), attempt(PLAIN, "ok")), timed_load=2.0
    ).timed_busy


def test_an_unsettled_verdict_is_not_remembered(tmp_path: Path, fresh: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    run, _ = counting_probe({CpuPath.FULL: "error"})
    verdict = verdict_for(model, run=run)
    assert verdict.path is CpuPath.FULL and not verdict.settled
    assert not list(fresh.glob("*.json"))


def test_an_unreadable_record_means_one_more_probe(tmp_path: Path, fresh: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    fresh.mkdir(parents=True)
    (fresh / f"{cpu_path.probe_key(model)}.json").write_text("{torn", encoding="utf-8")
    run, calls = counting_probe({FULL: "ok", PLAIN: "ok@3"})
    assert verdict_for(model, run=run).path is CpuPath.FULL and calls == [FULL, PLAIN]
    record = json.loads(next(fresh.glob("*.json")).read_text(encoding="utf-8"))
    assert Verdict.from_json(record).path is CpuPath.FULL


def test_a_missing_model_is_not_probed(tmp_path: Path) -> None:
    verdict = verdict_for(tmp_path / "absent.gguf", run=lambda m, p: pytest.fail("probed a missing file"))
    assert verdict.path is CpuPath.FULL and not verdict.settled


@pytest.mark.model
def test_real_children_that_die_by_a_signal(monkeypatch: pytest.MonkeyPatch, fresh: Path) -> None:
    """The real probe child, killed by SIGSEGV after loading as a faulting kernel would: the ladder
    moves on to a path whose child survives, and that path really decodes."""
    monkeypatch.setenv("FIMBLE_PROBE_CRASH", "full=SIGSEGV,no-amx=SIGSEGV")
    verdict = verdict_for(model_path(SMALL))
    assert verdict.path is CpuPath.PLAIN and verdict.settled, verdict
    crashed = [a for a in verdict.attempts if a.outcome == "crashed"]
    assert crashed and all(a.signal == "SIGSEGV" for a in crashed)
    assert verdict.attempts[-1].outcome == "ok"
    assert "CPU_REPACK" in verdict.extra_bufts or not verdict.extra_bufts  # what this build offers

    monkeypatch.setenv("FIMBLE_PROBE_CRASH", "full=SIGILL,no-amx=SIGILL,plain=SIGILL")
    dead = verdict_for(model_path(SMALL), reprobe=True)
    assert dead.path is None and "make rebuild-llama" in dead.problem()


@pytest.mark.model
def test_the_engine_loads_on_the_path_the_probe_chose(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine asks the same verdict: plain when the faster paths crashed, an actionable error
    (not a core dump) when nothing runs."""
    from fimble.completion.engine import Engine, EngineConfig
    from fimble.errors import EngineError

    monkeypatch.setenv("FIMBLE_PROBE_CRASH", "full=SIGSEGV,no-amx=SIGSEGV")
    engine = Engine(model_path(SMALL), EngineConfig(n_ctx=512))
    assert engine.cpu.path is CpuPath.PLAIN
    assert engine.generate(engine.tokenize("def add(a, b):\n    return"), max_tokens=4).tokens

    monkeypatch.setattr(cpu_path, "_memo", {})
    monkeypatch.setenv("FIMBLE_CPU_PATH_DIR", str(Path(str(cpu_path._verdict_dir())) / "dead"))
    monkeypatch.setenv("FIMBLE_PROBE_CRASH", "full=SIGILL,no-amx=SIGILL,plain=SIGILL")
    with pytest.raises(EngineError, match="make rebuild-llama"):
        Engine(model_path(SMALL), EngineConfig(n_ctx=512))


def test_a_forced_path_is_not_probed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fimble.errors import ConfigError

    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv("FIMBLE_CPU_PATH", "plain")
    forced = verdict_for(model, run=lambda m, p: pytest.fail("probed although a path was forced"))
    assert forced.path is CpuPath.PLAIN and "forced" in forced.summary()
    monkeypatch.setenv("FIMBLE_CPU_PATH", "fast")
    with pytest.raises(ConfigError, match=r"FIMBLE_CPU_PATH='fast'.*full, no-amx, plain"):
        verdict_for(model)
