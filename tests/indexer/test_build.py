"""Full passes: incremental updates (edit, delete, rename), the no-change re-run, the process pool."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from fimble.indexer import IndexConfig, Progress, WorkspaceIndex
from tests.indexer.conftest import write


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


def test_second_run_parses_nothing(index: WorkspaceIndex) -> None:
    report = index.build()
    assert report.parsed == 0 and report.touched == 0 and report.skipped == 0 and report.removed == 0
    assert report.unchanged == report.scanned


def test_touch_without_change_only_rehashes(index: WorkspaceIndex, workspace: Path) -> None:
    _bump_mtime(workspace / "pyproj/pkg/models.py")
    report = index.build()
    assert (report.parsed, report.touched) == (0, 1)
    assert index.build().touched == 0  # the new mtime was stored


def test_edit_is_reparsed(index: WorkspaceIndex, workspace: Path) -> None:
    path = workspace / "pyproj/pkg/models.py"
    path.write_text(path.read_text().replace("def make_user(", "def build_user("))
    _bump_mtime(path)
    report = index.build()
    assert report.parsed == 1
    assert index.definitions("make_user") == ()
    (found,) = index.definitions("build_user")
    assert found.path == "pyproj/pkg/models.py"
    assert {s.path for s in index.search("build_user")} >= {"pyproj/pkg/models.py"}
    assert all("def make_user(" not in s.text for s in index.search("make_user name age"))


def test_delete_is_purged(index: WorkspaceIndex, workspace: Path) -> None:
    (workspace / "goproj/store/store.go").unlink()
    report = index.build()
    assert report.removed == 1
    assert index.definitions("Store") == () and index.file_outline("goproj/store/store.go") == ()
    assert index.imports_of("goproj/main.go")[1].targets == ()  # resolution follows the files indexed now
    assert all(s.path != "goproj/store/store.go" for s in index.search("Store Get Put items mu"))


def test_rename_moves_everything(index: WorkspaceIndex, workspace: Path) -> None:
    (workspace / "pyproj/pkg/models.py").rename(workspace / "pyproj/pkg/entities.py")
    report = index.build()
    assert report.removed == 1 and report.parsed == 1
    (user,) = index.definitions("User")
    assert user.path == "pyproj/pkg/entities.py"
    assert index.file_outline("pyproj/pkg/models.py") == ()
    by_spec = {i.spec: i.targets for i in index.imports_of("pyproj/pkg/service.py")}
    assert by_spec[".models"] == ()  # the old module name no longer resolves


def test_new_file_makes_an_old_import_resolve(index: WorkspaceIndex, workspace: Path) -> None:
    assert {i.spec: i.targets for i in index.imports_of("pyproj/pkg/service.py")}["..outside"] == ()
    write(workspace, "pyproj/outside.py", "nothing = None\n")
    index.build()
    by_spec = {i.spec: i.targets for i in index.imports_of("pyproj/pkg/service.py")}
    assert by_spec["..outside"] == ("pyproj/outside.py",)


def test_binary_files_are_remembered_not_reread(index: WorkspaceIndex, workspace: Path) -> None:
    assert index.build().skipped == 0  # data/blob.txt was sniffed once, in the first pass
    blob = workspace / "data/blob.txt"
    blob.write_text("now it is text zqnowtext\n")
    _bump_mtime(blob)
    index.build()
    assert [s.path for s in index.search("zqnowtext")] == ["data/blob.txt"]
    blob.write_bytes(b"\x00binary again zqnowtext")
    _bump_mtime(blob)
    index.build()
    assert index.search("zqnowtext") == ()


def test_file_growing_past_the_limit_is_dropped(index: WorkspaceIndex, workspace: Path) -> None:
    path = workspace / "pyproj/main.py"
    path.write_text(path.read_text() + "# padding\n" * 120_000)
    index.build()
    assert index.file_outline("pyproj/main.py") == ()


def test_progress_is_reported(workspace: Path, config: IndexConfig) -> None:
    seen: list[Progress] = []
    with WorkspaceIndex.open(workspace, config) as ix:
        ix.build(progress=seen.append)
    assert seen[0].files_done == 0 and seen[-1].files_done == seen[-1].files_total > 20
    assert seen[-1].bytes_done == seen[-1].bytes_total > 0


def test_process_pool_gives_the_same_index(workspace: Path, tmp_path: Path, monkeypatch) -> None:
    pooled = IndexConfig(workers=2, pool_min_files=1)
    with WorkspaceIndex.open(workspace, pooled) as ix:
        report = ix.build()
        assert report.parsed > 20
        answers = (ix.definitions("User"), ix.file_outline("web/src/util.ts"), ix.search("zanzibarquux"))
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "other-home"))
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        assert answers == (
            ix.definitions("User"),
            ix.file_outline("web/src/util.ts"),
            ix.search("zanzibarquux"),
        )


def test_pass_waits_while_a_completion_runs(workspace: Path, config: IndexConfig) -> None:
    with WorkspaceIndex.open(workspace, config) as ix:
        seen: list[Progress] = []
        with ix.busy():
            future_done = threading.Event()
            thread = threading.Thread(target=lambda: (ix.build(progress=seen.append), future_done.set()))
            thread.start()
            time.sleep(0.5)
            assert not future_done.is_set()
            assert max((p.files_done for p in seen), default=0) == 0  # not a single file while busy
        thread.join(30)
        assert future_done.is_set() and ix.stats().ready


def test_pause_and_resume(workspace: Path, config: IndexConfig) -> None:
    with WorkspaceIndex.open(workspace, config) as ix:
        ix.build()
        ix.pause()
        assert ix.stats().paused
        ix.update_buffer("pyproj/paused.py", "def paused_def(): pass\n")
        assert not ix.flush(0.3)
        assert ix.definitions("paused_def") == ()
        ix.resume()
        assert ix.flush(10)
        assert ix.definitions("paused_def")


def test_reads_during_a_pass_see_consistent_snapshots(tmp_path: Path) -> None:
    """Queries from several threads while the writer commits batch after batch: every answer comes
    from one committed state (a file's outline is all-old or all-new, never mixed)."""
    root = tmp_path / "ws"
    for i in range(120):
        write(root, f"m/mod_{i}.py", "".join(f"def f{i}_{j}(): return {j}\n" for j in range(30)))
    config = IndexConfig(workers=0, batch_files=5, batch_seconds=0.01)
    with WorkspaceIndex.open(root, config) as ix:
        ix.build()
        for i in range(120):
            write(root, f"m/mod_{i}.py", "".join(f"def g{i}_{j}(): return {j}\n" for j in range(30)))
            _bump_mtime(root / f"m/mod_{i}.py")
        errors: list[BaseException] = []
        done = threading.Event()

        def reader() -> None:
            try:
                while not done.is_set():
                    for i in (0, 59, 119):
                        names = {d.name[0] for d in ix.file_outline(f"m/mod_{i}.py")}
                        assert names in ({"f"}, {"g"}), names
                    ix.search("return")
                    ix.symbols_near("m/mod_5.py", 3)
            except BaseException as err:
                errors.append(err)

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        report = ix.build()
        done.set()
        for t in threads:
            t.join(10)
        assert not errors, errors[0]
        assert report.parsed == 120
        assert {d.name[0] for d in ix.file_outline("m/mod_0.py")} == {"g"}


def test_pool_groups_keep_a_language_together_biggest_first() -> None:
    """A language with few files lands in one group (one worker compiles its query), and groups
    still start with the biggest files."""
    from fimble.indexer.build import _groups
    from fimble.indexer.walker import FileEntry
    from fimble.indexer.worker import Task

    sizes = {"big.py": 900_000, "a.cpp": 50_000, "b.py": 40_000, "c.py": 30_000, "b.cpp": 20_000, "n.md": 10}
    names = sorted(sizes, key=lambda rel: -sizes[rel])
    tasks = [Task(rel, rel, None) for rel in names]
    entries = [FileEntry(rel, rel, sizes[rel], 0) for rel in names]
    groups = _groups(tasks, entries)
    assert [[t.rel for t in group] for group, _ in groups] == [
        ["big.py"],  # a group is cut at 768 KiB
        ["a.cpp", "b.cpp"],
        ["b.py", "c.py"],
        ["n.md"],
    ]
    assert [size for _, size in groups] == [900_000, 70_000, 70_000, 10]


class _Collect:
    """Stands in for the committer and the progress tracker of one pass."""

    def __init__(self) -> None:
        self.results: list = []
        self.files = 0

    def add(self, result) -> None:
        self.results.append(result)

    def advance(self, files: int, nbytes: int) -> None:
        self.files += files


def test_tail_groups_are_analysed_here_while_the_pool_starts(workspace: Path) -> None:
    """While the first submission waits for its worker to exist, the writer thread analyses the
    smallest groups, from the end of the queue; the first group goes to the pool."""
    from concurrent.futures import Future

    from fimble.indexer.build import _start_pool
    from fimble.indexer.gate import Gate
    from fimble.indexer.worker import FileDoc, Task

    class SlowPool:
        def submit(self, fn, tasks):
            while sink.files < 3:  # a worker that takes a while to exist
                time.sleep(0.01)
            self.tasks = tasks
            return Future()

    paths = sorted(p for p in workspace.rglob("*.py") if p.is_file())[:4]
    groups = [([Task(p.name, str(p), None)], p.stat().st_size) for p in paths]
    sink = _Collect()
    pool = SlowPool()
    future = _start_pool(pool, groups, IndexConfig(workers=2), sink, Gate(), threading.Event(), sink)
    assert isinstance(future, Future) and [t.rel for t in pool.tasks] == [paths[0].name]
    assert len(groups) == 1 and sink.files == 3
    assert [r.rel for r in sink.results] == [p.name for p in reversed(paths[1:])]
    assert all(isinstance(r, FileDoc) for r in sink.results)


def _contents(ix: WorkspaceIndex) -> dict:
    """Everything a pass decides, without what depends on the order files were committed in (fids,
    segments): per file its record, outline and imports; the totals; a search."""
    from fimble.indexer.build import known_files

    store = ix._store
    files = known_files(store)
    state: dict = {}
    for rel, (size, _mtime, digest) in sorted(files.items()):
        outline = tuple((d.qualname, d.kind, d.span) for d in ix.file_outline(rel))
        imports = tuple((i.spec, i.names, i.targets) for i in ix.imports_of(rel))
        state[rel] = (size, digest, outline, imports)
    with store.read() as txn:
        state["#skipped"] = sorted(k for k, _ in txn.cursor(db=store.db["skipped"]))
    stats = ix.stats()
    state["#stats"] = (stats.files, stats.definitions, stats.blocks, stats.languages, stats.ready)
    state["#search"] = [s.path for s in ix.search("zanzibarquux User make_user", k=5)]
    return state


def _clean_build(workspace: Path, home: Path, monkeypatch) -> dict:
    monkeypatch.setenv("FIMBLE_HOME", str(home))
    with WorkspaceIndex.open(workspace, IndexConfig(workers=0)) as ix:
        ix.build()
        return _contents(ix)


class _DyingPool:
    """Stands in for the ProcessPoolExecutor: answers the first ``alive`` submissions, then dies the
    way a real pool does when a worker exits: every future not answered yet fails with
    BrokenProcessPool, and (with ``refuse``) so does the next submission."""

    def __init__(self, *args: object, alive: int, refuse: bool, **kwargs: object) -> None:
        self.alive = alive
        self.refuse = refuse
        self.submitted = 0

    def submit(self, fn, tasks):
        from concurrent.futures import Future
        from concurrent.futures.process import BrokenProcessPool

        from fimble.indexer.build import worker_config
        from fimble.indexer.worker import analyze_path

        if self.refuse and self.submitted > self.alive:
            raise BrokenProcessPool("a child process terminated abruptly")
        self.submitted += 1
        future: Future = Future()
        if self.submitted <= self.alive:
            future.set_result([analyze_path(t, worker_config(IndexConfig())) for t in tasks])
        else:
            future.set_exception(BrokenProcessPool("a child process terminated abruptly"))
        return future

    def shutdown(self, wait: bool = True, cancel_futures: bool = False) -> None:
        pass


@pytest.mark.parametrize("refuse", [False, True], ids=["found-in-results", "found-on-submit"])
@pytest.mark.parametrize("alive", [0, 2])
def test_pool_death_mid_pass_gives_the_same_index(
    workspace: Path, tmp_path: Path, monkeypatch, caplog, alive: int, refuse: bool
) -> None:
    """Groups in flight when the pool dies are analysed in-process, none lost, none twice. (A group
    whose future failed used to leave ``inflight`` before the error was raised, so the fallback
    never saw it: a build lost up to 32 files, the biggest first.)"""
    from fimble.indexer import build

    pools: list[_DyingPool] = []

    def make_pool(*args: object, **kwargs: object) -> _DyingPool:
        pools.append(_DyingPool(alive=alive, refuse=refuse))
        return pools[-1]

    monkeypatch.setattr(build, "ProcessPoolExecutor", make_pool)
    # The first group is submitted without the start-up overlap: while a starter thread submits it,
    # the real ``_start_pool`` analyses the smallest groups here, and on a busy machine it can take
    # so many of this small workspace's groups that fewer than ``alive`` + 1 are ever submitted, so
    # the pool never dies (a CI run saw it). The overlap itself is tested on its own.
    monkeypatch.setattr(
        build, "_start_pool", lambda pool, groups, *_: pool.submit(build.analyze_group, groups[0][0])
    )
    with (
        caplog.at_level("WARNING", logger="fimble.indexer.build"),
        WorkspaceIndex.open(workspace, IndexConfig(workers=2, pool_min_files=1)) as ix,
    ):
        report = ix.build()
        dying = _contents(ix)
    assert "the indexing pool died" in caplog.text and pools[0].submitted > alive  # died, a group in flight
    assert report.parsed + report.skipped == report.scanned
    assert dying == _clean_build(workspace, tmp_path / "clean-home", monkeypatch)


def test_a_worker_killed_while_sending_does_not_hang_the_pass(
    workspace: Path, tmp_path: Path, monkeypatch, caplog
) -> None:
    """A worker dies halfway through sending its result (a real pool, a real SIGKILL): CPython's
    pool never notices, so the pass used to wait forever (2 of 26 runs of an earlier fault test).
    The watchdog sees the dead pid, gives up on the pool without waiting on it, and the pass ends
    with the index a normal build makes; no pool thread is left for the interpreter's exit to wait on."""
    import concurrent.futures.process as cf_process

    from fimble.indexer import build
    from tests.indexer.dying_worker import die_once_while_sending

    marker = tmp_path / "DIE_ONCE"  # beside the workspace: claimed by the first group's worker
    marker.touch()
    monkeypatch.setattr(build, "analyze_group", die_once_while_sending)
    monkeypatch.setattr(
        build, "_start_pool", lambda pool, groups, *_: pool.submit(build.analyze_group, groups[0][0])
    )
    outcome: dict = {}

    def run() -> None:
        with WorkspaceIndex.open(workspace, IndexConfig(workers=2, pool_min_files=1)) as ix:
            outcome["report"] = ix.build()
            outcome["contents"] = _contents(ix)

    with caplog.at_level("WARNING", logger="fimble.indexer.build"):
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(600)  # a hang guard, not a timing: the pass takes seconds
        assert not thread.is_alive(), "the indexing pass hung on a pool whose worker died while sending"
    assert not marker.exists(), "no worker died"
    assert "did not notice" in caplog.text and "the indexing pool died" in caplog.text
    report = outcome["report"]
    assert report.parsed + report.skipped == report.scanned
    for manager in list(cf_process._threads_wakeups):
        manager.join(30)
        assert not manager.is_alive(), "the pool's manager thread still waits on the dead worker"
    assert outcome["contents"] == _clean_build(workspace, tmp_path / "clean-home", monkeypatch)


UNGUARDED = """
import os
from fimble.indexer import IndexConfig, WorkspaceIndex

# No ``if __name__ == "__main__":``: each pool worker imports this script again, cannot open the
# index the parent holds (IndexLocked) and dies, so the pool breaks.
ix = WorkspaceIndex.open(os.environ["FIMBLE_TEST_ROOT"], IndexConfig(workers=2, pool_min_files=1))
report = ix.build()
ix.close()
print("PARSED", report.parsed + report.skipped, report.scanned)
"""


@pytest.mark.slow
def test_unguarded_script_whose_pool_dies_gives_the_same_index(
    workspace: Path, tmp_path: Path, monkeypatch
) -> None:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, "FIMBLE_TEST_ROOT": str(workspace), "PYTHONPATH": str(root)}
    for run in range(3):  # which groups are in flight when the pool dies varies from run to run
        home = tmp_path / f"home-{run}"
        env["FIMBLE_HOME"] = str(home)
        done = subprocess.run(
            [sys.executable, str(script)], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr[-2000:]
        assert "the indexing pool died" in done.stderr
        parsed, scanned = done.stdout.split()[1:3]
        assert parsed == scanned
        monkeypatch.setenv("FIMBLE_HOME", str(home))
        with WorkspaceIndex.open(workspace, IndexConfig(workers=0), writable=False) as ix:
            assert _contents(ix) == _clean_build(workspace, tmp_path / f"clean-{run}", monkeypatch)
