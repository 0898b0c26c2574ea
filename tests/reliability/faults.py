"""SIGKILL at a random moment of a store's write, in a real child process, then check the store.

Each ``*_round`` starts a child that writes one store as fimble does (saved KV states, the completion
cache's LMDB), kills it with SIGKILL after a random delay, reopens the store in this process and
says what it found. The tests run a few rounds; ``bench/faults.py`` runs twenty of each and writes
the counts to JSON. A round fails (``Round.ok`` False) when the store does not open, an entry the
child had reported written is missing or wrong, a damaged entry is served, or the store refuses
the next write.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

__all__ = ["Round", "batch_round", "cache_round", "kvstate_round"]


@dataclass
class Round:
    store: str
    killed_after_s: float
    written: int  # entries the child reported durable before it died
    found: int  # entries the reopened store serves
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


KV_CHILD = """
import sys, numpy as np
from fimble.completion.engine.kvstore import KVStore
store = KVStore(sys.argv[1], max_bytes=1 << 30)
rng = np.random.default_rng(int(sys.argv[2]))
print("OPEN", flush=True)
for i in range(10_000):
    tokens = rng.integers(0, 150_000, size=int(rng.integers(50, 400)), dtype=np.int32)
    tokens[0] = i  # no state is a prefix of another: none supersedes the rest
    blob = rng.integers(0, 255, size=int(rng.integers(1, 12)) << 20, dtype=np.uint8).tobytes()
    entry = store.save(tokens, blob)
    print("SAVED", entry.key, len(blob), blob[:8].hex(), blob[-8:].hex(), flush=True)
"""

CACHE_CHILD = """
import sys
from pathlib import Path
from fimble.completion.cache import CacheConfig, Cached, CompletionCache
cache = CompletionCache(CacheConfig(path=Path(sys.argv[1]), disk_mb=64, disk_entries=200_000))
start = int(sys.argv[2])
print("OPEN", flush=True)
for i in range(start, start + 1_000_000):
    cache.put(f"key-{i}".encode(), Cached(text=f"value {i} " * (1 + i % 40), multiline=i % 2 == 0))
    if i % 50 == 49:
        cache.flush()
        print("FLUSHED", i + 1, flush=True)
"""

BATCH_CHILD = """
import json, sys
from pathlib import Path
from fimble.batch import Journal, parse_items, run_batch
from tests.batch.fake import EchoEngine
lines = [json.dumps({"id": f"r{i}", "prompt": f"item {i} of the batch"}) for i in range(int(sys.argv[2]))]
with Journal(Path(sys.argv[1])) as journal:
    print("OPEN", flush=True)
    run_batch(EchoEngine(delay=0.002), parse_items(lines), journal, width=8)
"""


def _run_and_kill(code: str, args: list[str], delay: float) -> list[str]:
    """Run ``code`` until it prints OPEN, let it work ``delay`` seconds, SIGKILL it; its stdout lines."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()
    if first != "OPEN":
        proc.kill()
        proc.wait(30)
        raise RuntimeError(f"the child did not start: {first!r}")
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=60)
    return out.splitlines()


def kvstate_round(root: Path, rng: random.Random) -> Round:
    """Kill a child saving KV states (atomic tmp + rename); every reported save must read back
    whole, nothing half-written may be served, and the next save must work."""
    from fimble.completion.engine.kvstore import KVStore

    delay = rng.uniform(0.05, 2.0)
    lines = _run_and_kill(KV_CHILD, [str(root), str(rng.randrange(1 << 30))], delay)
    saved = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 5 and parts[0] == "SAVED":
            saved[parts[1]] = (int(parts[2]), parts[3], parts[4])
    problems = []
    store = KVStore(root, max_bytes=1 << 30)
    entries = {e.key: e for e in store.entries()}
    for key, (size, head, tail) in saved.items():
        entry = entries.get(key)
        blob = store.read(entry) if entry is not None else None
        if blob is None:
            problems.append(f"saved state {key} is missing or unreadable")
        elif (len(blob), bytes(blob[:8]).hex(), bytes(blob[-8:]).hex()) != (size, head, tail):
            problems.append(f"saved state {key} came back different")
    served = sum(1 for e in entries.values() if store.read(e) is not None)
    if store.save([1, 2, 3], b"after the crash") is None:
        problems.append("the next save failed")
    store.close()
    return Round("kvstate", round(delay, 3), len(saved), served, problems)


def cache_round(path: Path, rng: random.Random, start: int) -> Round:
    """Kill a child writing the completion cache (LMDB, flushed every 50 entries); the cache must
    reopen (not set aside as corrupt), serve every flushed entry it has not evicted for size (the
    oldest first) with its value, and take more."""
    from fimble.completion.cache import CacheConfig, Cached, CompletionCache

    delay = rng.uniform(0.05, 2.0)
    lines = _run_and_kill(CACHE_CHILD, [str(path), str(start)], delay)
    flushed = max((int(line.split()[1]) for line in lines if line.startswith("FLUSHED")), default=start)
    problems = []
    cache = CompletionCache(CacheConfig(path=path, disk_mb=64, disk_entries=200_000))
    stats = cache.stats()
    if stats.disk_state != "open":
        problems.append(f"the cache did not reopen: {stats.disk_state}")
    found = 0
    missing: list[int] = []
    for i in range(start, flushed):
        hit = cache.get(f"key-{i}".encode())
        expected = Cached(text=f"value {i} " * (1 + i % 40), multiline=i % 2 == 0)
        if hit is None:
            missing.append(i)
        elif hit[0] != expected:
            problems.append(f"flushed entry {i} came back different")
        else:
            found += 1
    # The cache is bounded: once its map is 80 % full it drops its oldest entries, so a child that
    # wrote a lot finds its first ones gone, by design. What a kill must not do is lose the newest:
    # every missing entry must be older than every one still there, and the last flush all there.
    if missing and (found == 0 or max(missing) > flushed - found - 1 or max(missing) >= flushed - 50):
        problems.append(f"flushed entries are missing out of eviction order: {missing[-5:]}")
    cache.put(b"after the crash", Cached("x", False))
    cache.flush()
    if cache.stats().disk_state != "open":
        problems.append("the next write failed")
    cache.close()
    return Round("completion_cache", round(delay, 3), flushed - start, found, problems[:5])


def batch_round(out: Path, rng: random.Random, items: int = 3000) -> Round:
    """Kill a child running ``fimble batch``'s runner (journal, then append, per group of 8); the
    journal must reopen, the repaired output hold each journaled id once with its right text, and a
    re-run finish the rest so that every id is answered exactly once."""
    from fimble.batch import Journal, parse_items, run_batch
    from tests.batch.fake import EchoEngine, answer_for

    delay = rng.uniform(0.05, 2.0)
    _run_and_kill(BATCH_CHILD, [str(out), str(items)], delay)
    problems = []
    with Journal(out) as journal:
        journaled = journal.done_ids()
        journal.repair()
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        ids = [r["id"] for r in rows]
        if len(ids) != len(set(ids)) or set(ids) != journaled:
            problems.append("the repaired output does not hold each journaled id once")
        wrong = [r["id"] for r in rows if r.get("text") != answer_for(f"item {r['id'][1:]} of the batch")]
        if wrong:
            problems.append(f"{len(wrong)} records came back different, e.g. {wrong[0]}")
        lines = [json.dumps({"id": f"r{i}", "prompt": f"item {i} of the batch"}) for i in range(items)]
        summary = run_batch(EchoEngine(), parse_items(lines), journal, width=8)
        if summary.skipped != len(journaled):
            problems.append(f"the re-run redid finished work ({summary.skipped} of {len(journaled)} skipped)")
    final = [json.loads(line)["id"] for line in out.read_text().splitlines()]
    if sorted(final) != sorted(f"r{i}" for i in range(items)):
        problems.append("after the re-run, some id is missing or answered twice")
    return Round("batch", round(delay, 3), len(journaled), len(final), problems)


def as_json(rounds: list[Round]) -> list[dict[str, object]]:
    return [json.loads(json.dumps(vars(r))) | {"ok": r.ok} for r in rounds]
