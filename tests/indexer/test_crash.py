"""Crash safety: SIGKILL an indexing process at random moments, reopen, finish, compare with a clean build.

Each kill lands somewhere in a pass (walking, parsing, inside a write transaction, compacting); LMDB's
copy-on-write commits mean the store must always reopen consistent, and the next run must converge to
exactly what a clean build of the same tree produces.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from fimble.indexer import IndexConfig, WorkspaceIndex
from fimble.indexer.build import known_files
from tests.indexer.conftest import write

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow

CHILD = """
import sys
from fimble.indexer import IndexConfig, WorkspaceIndex
workers = int(sys.argv[2])
config = IndexConfig(workers=workers, pool_min_files=8, batch_files=12, batch_seconds=0.02, worker_nice=0)
ix = WorkspaceIndex.open(sys.argv[1], config)
print("OPEN", flush=True)
ix.build()
for i in range(200):  # then churn buffers: tiny segments, dead versions, compactions
    ix.update_buffer(f"churn/c{i % 7}.py", f"def churned_{i % 7}(): return 'zqchurn{i}'\\n")
    ix.flush()
print("DONE", flush=True)
ix.close()
"""


def _make_tree(root: Path, seed: int) -> None:
    rng = random.Random(seed)
    for i in range(160):
        body = "".join(
            f"def fn_{i}_{j}(arg):\n    '''Doc {i} {j}.'''\n"
            f"    return arg + {rng.randint(0, 99)}  # zqtok{i}x{j}\n"
            for j in range(rng.randint(5, 60))
        )
        write(root, f"py/m{i // 20}/mod_{i}.py", f"import os\nfrom . import mod_{max(i - 1, 0)}\n{body}")
    for i in range(40):
        write(
            root,
            f"js/f{i}.js",
            f"import {{ x }} from './f{(i + 1) % 40}';\nexport function js_{i}() {{ return {i}; }}\n",
        )
        write(root, f"go/p{i}.go", f"package p\n\n// Go{i} doc.\nfunc Go{i}() int {{ return {i} }}\n")
        write(root, f"notes/n{i}.md", f"note {i} zqnote{i}\n" * rng.randint(1, 200))


def _mutate(root: Path, rng: random.Random) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file())
    for path in rng.sample(files, 8):
        choice = rng.random()
        if choice < 0.4:
            path.write_text(path.read_text() + f"\ndef added_{rng.randint(0, 10**6)}(): pass\n")
        elif choice < 0.7:
            path.unlink()
        else:
            path.rename(path.with_name("renamed_" + path.name))


def _snapshot(ix: WorkspaceIndex) -> dict:
    files = known_files(ix._store)
    state = {}
    for rel, (size, _mtime, digest) in sorted(files.items()):
        outline = tuple((d.qualname, d.kind, d.signature, d.doc, d.span) for d in ix.file_outline(rel))
        imports = tuple((i.spec, i.names, i.targets) for i in ix.imports_of(rel))
        state[rel] = (size, digest, outline, imports, ix.identifiers(rel))
    stats = ix.stats()
    state["#stats"] = (stats.files, stats.definitions, stats.blocks, stats.languages)
    searches = {}
    for rel in list(files)[::9]:
        idents = [w for w in ix.identifiers(rel) if w.startswith("zq")]
        if idents:
            searches[idents[0]] = [s.path for s in ix.search(idents[0], k=3)]
    state["#search"] = searches
    return state


def _start_child(workspace: Path, home: Path, workers: int) -> subprocess.Popen:
    env = {**os.environ, "FIMBLE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), str(workspace), str(workers)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "OPEN", proc.stderr.read()
    return proc


def _files_committed(workspace: Path) -> int:
    try:
        with WorkspaceIndex.open(workspace, IndexConfig(workers=0), writable=False) as reader:
            return reader.stats().files
    except Exception:
        return 0


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def _assert_no_orphaned_workers() -> None:
    """Pool workers of a SIGKILLed parent must not linger (they watch their parent), nor the
    forkserver they were forked from (it leaves when the last of them has)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        orphans = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            pool_process = b"spawn_main" in cmdline or b"multiprocessing.forkserver" in cmdline
            if stat[1] == "1" and pool_process and str(ROOT).encode() in cmdline:
                orphans.append(entry.name)
        if not orphans:
            return
        time.sleep(0.2)
    raise AssertionError(f"orphaned pool workers: {orphans}")


def test_sigkill_at_random_points_then_converge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(20260101)
    workspace = tmp_path / "ws"
    _make_tree(workspace, seed=7)
    home = tmp_path / "home"
    monkeypatch.setenv("FIMBLE_HOME", str(home))
    partial_seen = False
    for round_no in range(6):
        proc = _start_child(workspace, home, workers=2 if round_no % 2 else 0)
        if round_no == 0:  # make sure one kill lands in the middle of the first build
            deadline = time.monotonic() + 60
            while _files_committed(workspace) == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
        else:
            time.sleep(rng.uniform(0.0, 2.5))
        _kill(proc)
        # Whatever moment the kill hit, the store reopens and answers consistently.
        try:
            reader = WorkspaceIndex.open(workspace, IndexConfig(workers=0), writable=False)
        except Exception as err:  # a kill may land before the store exists
            assert "no index yet" in str(err), err
        else:
            with reader:
                stats = reader.stats()
                assert stats.files == len(known_files(reader._store))
                partial_seen |= not stats.ready and stats.files > 0
        if round_no % 2:
            _mutate(workspace, rng)
    assert partial_seen, "no kill landed between two commits of the first build"
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        for i in range(7):  # buffers the children pushed have no file on disk: a clean build lacks them
            ix.remove_file(f"churn/c{i}.py")
        ix.flush()
        crashed = _snapshot(ix)
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "clean-home"))
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        clean = _snapshot(ix)
    assert crashed.keys() == clean.keys()
    _assert_no_orphaned_workers()
    for key in clean:
        assert crashed[key] == clean[key], key
