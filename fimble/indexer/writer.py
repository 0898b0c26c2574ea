"""Apply analysed files to the store: one write transaction per batch, whole files only.

A batch either commits entirely or not at all and always holds complete file updates, so a process
killed at any instant leaves every file at its old or its new version, with counters consistent with
them. Every new content gets a new fid; the old version's per-file entries are deleted at once and its
postings are masked (``dead``) until compaction. The batch's postings become one new segment.
"""

from __future__ import annotations

import logging
import posixpath
import time

import lmdb
import numpy as np

from fimble.indexer import postings
from fimble.indexer.records import MAX_KEY, FileRecord, Stats, def_key, dumps, fid_bytes, loads, seg_bytes
from fimble.indexer.store import Store
from fimble.indexer.worker import FileDoc, Remove, Skip, Touch

__all__ = ["Op", "apply_batch", "bucket_key", "mark_ready"]

log = logging.getLogger(__name__)

Op = FileDoc | Touch | Skip | Remove


def bucket_key(bucket: int, seg: int) -> bytes:
    return bucket.to_bytes(2, "big") + seg_bytes(seg)


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class _Batch:
    """Counters of one transaction, written back by ``finish``."""

    def __init__(self, txn: lmdb.Transaction, db: dict) -> None:
        self.txn = txn
        self.db = db
        stats = Stats.unpack(txn.get(b"stats", db=db["meta"]))
        self.next_fid = stats.next_fid
        self.next_seg = stats.next_seg
        self.blocks = stats.blocks
        self.total_length = stats.total_length
        self.definitions = stats.definitions
        self.generation = stats.generation + 1
        self.languages = dict(stats.languages)
        self.dead: list[int] = []

    def finish(self) -> None:
        stats = Stats(
            next_fid=self.next_fid,
            next_seg=self.next_seg,
            blocks=self.blocks,
            total_length=self.total_length,
            definitions=self.definitions,
            generation=self.generation,
            languages=tuple(sorted((k, v) for k, v in self.languages.items() if v > 0)),
        )
        meta = self.db["meta"]
        self.txn.put(b"stats", stats.pack(), db=meta)
        if self.dead:
            old = self.txn.get(b"dead", db=meta) or b""
            self.txn.put(b"dead", old + np.asarray(self.dead, np.uint32).tobytes(), db=meta)


def apply_batch(store: Store, ops: list[Op], *, ready: bool = False) -> None:
    """Store ``ops`` (new contents, stat touches, skips, removals) atomically; with ``ready``, also
    mark the index built in the same transaction (a pass's last batch: one commit, one sync less)."""
    if not ops:
        if ready:
            mark_ready(store)
        return
    has_postings = any(isinstance(op, FileDoc) and op.hashes for op in ops)

    def _apply(txn: lmdb.Transaction) -> None:
        batch = _Batch(txn, store.db)
        seg = 0
        if has_postings:
            seg = batch.next_seg
            batch.next_seg += 1
        posted: list[tuple[int, bytes, bytes, bytes, bytes]] = []
        for op in ops:
            if isinstance(op, FileDoc):
                fid = _put(batch, op, seg)
                if fid and op.hashes:
                    posted.append((fid, op.hashes, op.entry_blocks, op.tfs, op.block_lengths))
            elif isinstance(op, Touch):
                _touch(batch, op)
            elif isinstance(op, Skip) and op.reason != "gone":
                _remove(batch, op.rel)
                txn.put(_b(op.rel), dumps((op.size, op.mtime_ns, op.reason)), db=store.db["skipped"])
            else:
                _remove(batch, op.rel)
                txn.delete(_b(op.rel), db=store.db["skipped"])
        if seg:
            cols = postings.build(posted)
            items = [(bucket_key(bucket, seg), value) for bucket, value in postings.encode(cols)]
            txn.cursor(db=store.db["post"]).putmulti(items)
            txn.put(seg_bytes(seg), dumps((len(posted), len(cols))), db=store.db["segs"])
        batch.finish()
        if ready:
            _put_ready(txn, store.db)

    store.write(_apply)


def mark_ready(store: Store) -> None:
    store.write(lambda txn: _put_ready(txn, store.db))


def _put_ready(txn: lmdb.Transaction, db: dict) -> None:
    txn.put(b"ready", dumps((True, time.time())), db=db["meta"])


def _record(batch: _Batch, rel_b: bytes) -> FileRecord | None:
    raw = batch.txn.get(rel_b, db=batch.db["files"])
    return FileRecord.unpack(raw) if raw else None


def _touch(batch: _Batch, op: Touch) -> None:
    rel_b = _b(op.rel)
    rec = _record(batch, rel_b)
    if rec is not None:
        batch.txn.put(rel_b, rec._replace(size=op.size, mtime_ns=op.mtime_ns).pack(), db=batch.db["files"])


def _remove(batch: _Batch, rel: str) -> None:
    rel_b = _b(rel)
    rec = _record(batch, rel_b)
    if rec is not None:
        _purge(batch, rel, rec)
        batch.txn.delete(rel_b, db=batch.db["files"])


def _purge(batch: _Batch, rel: str, rec: FileRecord) -> None:
    """Delete everything one version of a file contributed (its postings become dead)."""
    txn, db = batch.txn, batch.db
    fid4 = fid_bytes(rec.fid)
    cursor = txn.cursor(db=db["defs"])
    if cursor.set_range(fid4):
        while cursor.key()[:4] == fid4:
            name = _b(loads(cursor.value())[1])
            if len(name) <= MAX_KEY:
                txn.delete(name, cursor.key(), db=db["names"])
            if not cursor.delete():
                break
    for name in ("imports", "text", "blocks", "paths"):
        txn.delete(fid4, db=db[name])
    base, rel_b = _b(posixpath.basename(rel)), _b(rel)
    if len(base) <= MAX_KEY and len(rel_b) <= MAX_KEY:
        txn.delete(base, rel_b, db=db["base"])
    if base == b"go.mod":
        txn.delete(_b(posixpath.dirname(rel)), db=db["mods"])
    if rec.seg:
        batch.dead.append(rec.fid)
    batch.blocks -= rec.n_blocks
    batch.total_length -= rec.total_length
    batch.definitions -= rec.n_defs
    batch.languages[rec.language] = batch.languages.get(rec.language, 0) - 1


def _put(batch: _Batch, doc: FileDoc, seg: int) -> int:
    """Store one file version; returns its new fid (0 when the path cannot be a key)."""
    txn, db = batch.txn, batch.db
    rel_b = _b(doc.rel)
    if len(rel_b) > MAX_KEY:
        log.info("path too long for the index, skipped: %s", doc.rel)
        return 0
    old = _record(batch, rel_b)
    if old is not None:
        _purge(batch, doc.rel, old)
    fid = batch.next_fid
    batch.next_fid += 1
    fid4 = fid_bytes(fid)
    rec = FileRecord(
        fid=fid,
        seg=seg if doc.hashes else 0,
        size=doc.size,
        mtime_ns=doc.mtime_ns,
        digest=doc.digest,
        language=doc.language,
        n_lines=doc.n_lines,
        n_defs=len(doc.definitions),
        n_blocks=doc.n_blocks,
        total_length=doc.total_length,
        has_errors=doc.has_errors,
    )
    txn.put(rel_b, rec.pack(), db=db["files"])
    txn.put(fid4, rel_b, db=db["paths"])
    txn.delete(rel_b, db=db["skipped"])
    if doc.definitions:
        keys = [def_key(fid, idx) for idx in range(len(doc.definitions))]
        txn.cursor(db=db["defs"]).putmulti(zip(keys, doc.definitions, strict=True), append=True)
        names = zip(doc.def_names, keys, strict=True)
        txn.cursor(db=db["names"]).putmulti([(name, key) for name, key in names if 0 < len(name) <= MAX_KEY])
    if doc.imports:
        txn.put(fid4, dumps(doc.imports), db=db["imports"])
    txn.put(fid4, doc.data, db=db["text"], append=True)
    txn.put(fid4, doc.blocks, db=db["blocks"], append=True)
    base = _b(posixpath.basename(doc.rel))
    if len(base) <= MAX_KEY:
        txn.put(base, rel_b, db=db["base"])
    if doc.module:
        txn.put(_b(posixpath.dirname(doc.rel)), doc.module.encode(), db=db["mods"])
    batch.blocks += rec.n_blocks
    batch.total_length += rec.total_length
    batch.definitions += rec.n_defs
    batch.languages[rec.language] = batch.languages.get(rec.language, 0) + 1
    return fid
