"""Apply analysed files to the store: one write transaction per batch, whole files only.

A batch either commits entirely or not at all, and always contains complete file updates, so a process
killed at any instant leaves every file either at its old or at its new version, and the counters
(window count, total length, document frequencies) consistent with them. Document frequencies are
summed over the batch first, then written once per term.
"""

from __future__ import annotations

import logging
import posixpath
import time
from collections.abc import Iterable

import lmdb

from fimble.indexer.records import (
    MAX_KEY,
    FileRecord,
    Stats,
    def_key,
    dumps,
    fid_bytes,
    loads,
    post_key,
    u32,
)
from fimble.indexer.store import Store
from fimble.indexer.worker import FileDoc, Remove, Skip, Touch

__all__ = ["apply_batch", "mark_ready"]

log = logging.getLogger(__name__)

Op = FileDoc | Touch | Skip | Remove


class _Batch:
    """Mutable counters for one transaction."""

    def __init__(self, txn: lmdb.Transaction, db: dict) -> None:
        self.txn = txn
        self.db = db
        stats = Stats.unpack(txn.get(b"stats", db=db["meta"]))
        self.next_fid = stats.next_fid
        self.windows = stats.windows
        self.total_length = stats.total_length
        self.definitions = stats.definitions
        self.generation = stats.generation + 1
        self.languages = dict(stats.languages)
        self.df: dict[bytes, int] = {}

    def finish(self) -> None:
        txn, db = self.txn, self.db["df"]
        for term, delta in self.df.items():
            if not delta:
                continue
            raw = txn.get(term, db=db)
            count = (int.from_bytes(raw, "big") if raw else 0) + delta
            if count > 0:
                txn.put(term, u32(count), db=db)
            elif raw is not None:
                txn.delete(term, db=db)
        stats = Stats(
            next_fid=self.next_fid,
            windows=self.windows,
            total_length=self.total_length,
            definitions=self.definitions,
            generation=self.generation,
            languages=tuple(sorted((k, v) for k, v in self.languages.items() if v > 0)),
        )
        txn.put(b"stats", stats.pack(), db=self.db["meta"])


def apply_batch(store: Store, ops: list[Op]) -> None:
    """Store ``ops`` (new contents, stat touches, removals) atomically."""
    if not ops:
        return

    def _apply(txn: lmdb.Transaction) -> None:
        batch = _Batch(txn, store.db)
        for op in ops:
            if isinstance(op, FileDoc):
                _put(batch, op)
            elif isinstance(op, Touch):
                _touch(batch, op)
            else:
                _remove(batch, op.rel)
        batch.finish()

    store.write(_apply)


def mark_ready(store: Store) -> None:
    store.write(lambda txn: txn.put(b"ready", dumps((True, time.time())), db=store.db["meta"]))


def _record(batch: _Batch, rel_b: bytes) -> FileRecord | None:
    raw = batch.txn.get(rel_b, db=batch.db["files"])
    return FileRecord.unpack(raw) if raw else None


def _touch(batch: _Batch, op: Touch) -> None:
    rel_b = op.rel.encode("utf-8", "surrogateescape")
    rec = _record(batch, rel_b)
    if rec is not None:
        batch.txn.put(rel_b, rec._replace(size=op.size, mtime_ns=op.mtime_ns).pack(), db=batch.db["files"])


def _remove(batch: _Batch, rel: str) -> None:
    rel_b = rel.encode("utf-8", "surrogateescape")
    rec = _record(batch, rel_b)
    if rec is None:
        return
    _purge(batch, rel, rec)
    batch.txn.delete(rel_b, db=batch.db["files"])
    batch.txn.delete(fid_bytes(rec.fid), db=batch.db["paths"])


def _purge(batch: _Batch, rel: str, rec: FileRecord) -> None:
    """Delete everything a file contributed except its ``files``/``paths`` entries."""
    txn, db = batch.txn, batch.db
    fid4 = fid_bytes(rec.fid)
    cursor = txn.cursor(db=db["defs"])
    if cursor.set_range(fid4):
        while cursor.key()[:4] == fid4:
            name = loads(cursor.value())[1].encode("utf-8", "surrogateescape")
            if len(name) <= MAX_KEY:
                txn.delete(name, cursor.key(), db=db["names"])
            if not cursor.delete():
                break
    raw = txn.pop(fid4, db=db["fterms"])
    if raw:
        df = batch.df
        for term, count in loads(raw):
            txn.delete(post_key(term, fid4), db=db["post"])
            df[term] = df.get(term, 0) - count
    for name in ("imports", "idents", "text", "windows"):
        txn.delete(fid4, db=db[name])
    base = posixpath.basename(rel).encode("utf-8", "surrogateescape")
    rel_b = rel.encode("utf-8", "surrogateescape")
    if len(base) <= MAX_KEY and len(rel_b) <= MAX_KEY:
        txn.delete(base, rel_b, db=db["base"])
    if base == b"go.mod":
        txn.delete(posixpath.dirname(rel).encode("utf-8", "surrogateescape"), db=db["mods"])
    batch.windows -= rec.n_windows
    batch.total_length -= rec.total_length
    batch.definitions -= rec.n_defs
    batch.languages[rec.language] = batch.languages.get(rec.language, 0) - 1


def _put(batch: _Batch, doc: FileDoc) -> None:
    txn, db = batch.txn, batch.db
    rel_b = doc.rel.encode("utf-8", "surrogateescape")
    if len(rel_b) > MAX_KEY:
        log.info("path too long for the index, skipped: %s", doc.rel)
        return
    old = _record(batch, rel_b)
    if old is not None:
        _purge(batch, doc.rel, old)
        fid = old.fid
    else:
        fid = batch.next_fid
        batch.next_fid += 1
    fid4 = fid_bytes(fid)
    rec = FileRecord(
        fid=fid,
        size=doc.size,
        mtime_ns=doc.mtime_ns,
        digest=doc.digest,
        language=doc.language,
        n_lines=doc.n_lines,
        n_defs=len(doc.definitions),
        n_windows=len(doc.windows),
        total_length=doc.total_length,
        has_errors=doc.has_errors,
    )
    txn.put(rel_b, rec.pack(), db=db["files"])
    txn.put(fid4, rel_b, db=db["paths"])
    _put_definitions(txn, db, fid, doc.definitions)
    if doc.imports:
        txn.put(fid4, dumps(doc.imports), db=db["imports"])
    if doc.identifiers:
        txn.put(fid4, dumps(doc.identifiers), db=db["idents"])
    txn.put(fid4, doc.data, db=db["text"])
    txn.put(fid4, dumps(doc.windows), db=db["windows"])
    if doc.postings:
        terms = [(term, len(blob) // 6) for term, blob in doc.postings.items()]
        txn.cursor(db=db["post"]).putmulti(_post_items(doc.postings, fid4))
        txn.put(fid4, dumps(terms), db=db["fterms"])
        df = batch.df
        for term, count in terms:
            df[term] = df.get(term, 0) + count
    base = posixpath.basename(doc.rel).encode("utf-8", "surrogateescape")
    if len(base) <= MAX_KEY:
        txn.put(base, rel_b, db=db["base"])
    if doc.module:
        mod_dir = posixpath.dirname(doc.rel).encode("utf-8", "surrogateescape")
        txn.put(mod_dir, doc.module.encode(), db=db["mods"])
    batch.windows += rec.n_windows
    batch.total_length += rec.total_length
    batch.definitions += rec.n_defs
    batch.languages[rec.language] = batch.languages.get(rec.language, 0) + 1


def _post_items(postings: dict[bytes, bytes], fid4: bytes) -> Iterable[tuple[bytes, bytes]]:
    for term, blob in postings.items():
        yield term + b"\0" + fid4, blob


def _put_definitions(txn: lmdb.Transaction, db: dict, fid: int, definitions: list[tuple]) -> None:
    names = txn.cursor(db=db["names"])
    defs = txn.cursor(db=db["defs"])
    for idx, record in enumerate(definitions):
        key = def_key(fid, idx)
        defs.put(key, dumps(record))
        name = record[1].encode("utf-8", "surrogateescape")
        if 0 < len(name) <= MAX_KEY:
            names.put(name, key)
