"""Compaction: merge postings segments so a query reads few of them, and drop stale entries.

Every write batch adds a segment; a query reads one bucket per segment per term, so segments must stay
few. The policy (checked by the writer thread when it is idle):

* more than ``MAX_SEGMENTS`` sizeable segments: merge the smallest ones down to ``KEEP_SEGMENTS``;
* at least ``TINY_COUNT`` tiny segments (editor saves make one each): merge those. Tiny segments are
  cheap for queries (a term's bucket rarely has one), so a few may pile up before a merge;
* dead fids (replaced or deleted file versions) outnumber a quarter of the live files: merge everything,
  which drops them all.

A merge runs in chunks of buckets, one write transaction each, recording its progress in meta under
``b"compact"``: queries between chunks see every bucket either merged or not (never both), a completion
can interrupt between chunks, and a process killed mid-merge resumes where it stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import lmdb
import numpy as np

from fimble.indexer import postings
from fimble.indexer.gate import Gate
from fimble.indexer.records import FileRecord, Stats, dumps, loads, seg_bytes
from fimble.indexer.store import Store
from fimble.indexer.writer import bucket_key

__all__ = ["Plan", "compact", "plan"]

log = logging.getLogger(__name__)

MAX_SEGMENTS = 8
KEEP_SEGMENTS = 4
TINY_ENTRIES = 20000
TINY_COUNT = 8
CHUNK_ENTRIES = 200_000  # postings merged per write transaction, about 50 ms of work...
MAX_CHUNK_BUCKETS = 128  # ...and never more buckets than this: an update waits for one chunk at most


@dataclass(frozen=True, slots=True)
class Plan:
    """Merge ``sources`` into ``target``; ``full`` drops every dead fid known at ``dead_at_start``."""

    target: int
    sources: tuple[int, ...]
    full: bool
    dead_at_start: int
    next_bucket: int = 0


def _segments(txn: lmdb.Transaction, db: dict) -> list[tuple[int, int, int]]:
    """(seg, files, entries) for every segment."""
    return [(int.from_bytes(k, "big"), *loads(v)) for k, v in txn.cursor(db=db["segs"])]


def plan(store: Store) -> Plan | None:
    """The merge to run now, if any (an unfinished one first)."""
    with store.read() as txn:
        db = store.db
        raw = txn.get(b"compact", db=db["meta"])
        if raw:
            return Plan(*loads(raw))
        segs = _segments(txn, db)
        dead = len(txn.get(b"dead", db=db["meta"]) or b"") // 4
        live = txn.stat(db["files"])["entries"]
        next_seg = Stats.unpack(txn.get(b"stats", db=db["meta"])).next_seg
    heavy_dead = dead > max(64, live // 4)
    if len(segs) < 2 and not heavy_dead:
        return None
    by_size = sorted(segs, key=lambda s: s[2])
    tiny = [s[0] for s in segs if s[2] < TINY_ENTRIES]
    if heavy_dead:
        sources, full = [s[0] for s in segs], True
    elif len(segs) - len(tiny) > MAX_SEGMENTS:
        sources, full = [s[0] for s in by_size[: len(segs) - KEEP_SEGMENTS + 1]], False
    elif len(tiny) >= TINY_COUNT:
        sources, full = tiny, False
    else:
        return None
    return Plan(next_seg, tuple(sorted(sources)), full, dead if full else 0)


def compact(
    store: Store,
    gate: Gate | None = None,
    stop: threading.Event | None = None,
    interrupt: Callable[[], bool] | None = None,
) -> bool:
    """Run (or resume) the planned merge; True when one finished, False when there was nothing to do
    or it was interrupted (``stop`` set, or ``interrupt()`` true between chunks); the next call
    resumes an interrupted merge."""
    job = plan(store)
    if job is None:
        return False
    store.write(lambda txn: _start(txn, store.db, job))
    with store.read() as txn:
        sizes = {s: entries for s, _, entries in _segments(txn, store.db)}
    per_bucket = max(sum(sizes.get(s, 0) for s in job.sources) / postings.N_BUCKETS, 1.0)
    chunk = int(min(MAX_CHUNK_BUCKETS, max(32, CHUNK_ENTRIES / per_bucket)))
    bucket = job.next_bucket
    first = True
    try:
        while bucket < postings.N_BUCKETS:
            if gate is not None and not gate.wait_idle(stop):
                return False
            # At least one chunk per call, so a steady stream of updates cannot starve the merge.
            if (stop is not None and stop.is_set()) or (not first and interrupt is not None and interrupt()):
                return False
            first = False
            end = min(bucket + chunk, postings.N_BUCKETS)
            store.write(lambda txn, a=bucket, z=end: _merge_chunk(txn, store.db, job, a, z))
            bucket = end
        store.write(lambda txn: _finish(txn, store.db, job))
    except _Stale:
        return False
    log.info(
        "merged %d postings segment(s)%s", len(job.sources), " and dropped stale entries" if job.full else ""
    )
    return True


class _Stale(Exception):
    """The merge recorded in the store is not the one this caller planned (someone else finished or
    advanced it): stop rather than write a chunk twice."""


def _check(txn: lmdb.Transaction, db: dict, job: Plan, at: int) -> None:
    raw = txn.get(b"compact", db=db["meta"])
    if raw is None or tuple(loads(raw))[:2] != (job.target, job.sources) or loads(raw)[4] != at:
        raise _Stale


def _start(txn: lmdb.Transaction, db: dict, job: Plan) -> None:
    meta = db["meta"]
    if txn.get(b"compact", db=meta) is None:
        stats = Stats.unpack(txn.get(b"stats", db=meta))
        txn.put(b"stats", stats._replace(next_seg=max(stats.next_seg, job.target + 1)).pack(), db=meta)
        txn.put(b"compact", dumps(tuple(_fields(job))), db=meta)


def _fields(job: Plan) -> tuple:
    return (job.target, job.sources, job.full, job.dead_at_start, job.next_bucket)


def _dead(txn: lmdb.Transaction, db: dict) -> np.ndarray:
    return np.frombuffer(txn.get(b"dead", db=db["meta"]) or b"", np.uint32)


def _merge_chunk(txn: lmdb.Transaction, db: dict, job: Plan, first: int, end: int) -> None:
    _check(txn, db, job, first)
    post = db["post"]
    dead = _dead(txn, db)
    sources = set(job.sources)
    cursor = txn.cursor(db=post)
    for bucket in range(first, end):
        prefix = bucket.to_bytes(2, "big")
        values: list[bytes] = []
        keys: list[bytes] = []
        found = cursor.set_range(prefix)
        while found:
            key = cursor.key()
            if key[:2] != prefix:
                break
            if int.from_bytes(key[2:], "big") in sources:
                keys.append(key)
                values.append(cursor.value())
            found = cursor.next()
        if not values:
            continue
        merged = postings.merge(values, dead)
        for key in keys:
            txn.delete(key, db=post)
        if merged is not None:
            txn.put(bucket_key(bucket, job.target), merged, db=post)
    progress = Plan(job.target, job.sources, job.full, job.dead_at_start, end)
    txn.put(b"compact", dumps(_fields(progress)), db=db["meta"])


def _finish(txn: lmdb.Transaction, db: dict, job: Plan) -> None:
    """Register the merged segment, retarget file records, and forget dead fids a full merge dropped."""
    _check(txn, db, job, postings.N_BUCKETS)
    segs = db["segs"]
    files = entries = 0
    for seg in job.sources:
        raw = txn.pop(seg_bytes(seg), db=segs)
        if raw:
            f, e = loads(raw)
            files += f
            entries += e
    if files or entries:
        txn.put(seg_bytes(job.target), dumps((files, entries)), db=segs)
    cursor = txn.cursor(db=db["files"])
    sources = set(job.sources)
    updates = []
    for key, value in cursor:
        rec = FileRecord.unpack(value)
        if rec.seg in sources:
            updates.append((key, rec._replace(seg=job.target).pack()))
    for key, value in updates:
        txn.put(key, value, db=db["files"])
    meta = db["meta"]
    if job.full:
        # Fids that died while the merge ran may sit in buckets merged before they died: keep those.
        txn.put(b"dead", (txn.get(b"dead", db=meta) or b"")[4 * job.dead_at_start :], db=meta)
    txn.delete(b"compact", db=meta)
