"""Queries over one read snapshot: every function takes an open read transaction.

These run on the keystroke path, so each one touches a bounded number of keys: no scans proportional
to the workspace, decoded values limited to what is returned. The façade (index.py) opens the
transaction; lexical search lives in bm25.py.
"""

from __future__ import annotations

import lmdb

from fimble.indexer import lexical
from fimble.indexer.languages import language_spec
from fimble.indexer.records import MAX_KEY, DefRecord, FileRecord, fid_bytes, loads
from fimble.indexer.resolve import resolve
from fimble.indexer.types import Definition, Import, Span, SymbolsNear

__all__ = ["TxnFiles", "definitions", "file_record", "identifiers", "imports_of", "outline", "symbols_near"]

_FAMILY = {"typescript": "javascript", "tsx": "javascript", "c": "cpp"}
_NEAR_IDENTIFIERS = 48
_AMBIGUOUS = 3


def _b(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class TxnFiles:
    """The resolver's view of the workspace (``resolve.FileLookup``) over a read transaction, plus
    small caches for the path/language of file ids met while decoding definitions."""

    def __init__(self, txn: lmdb.Transaction, db: dict) -> None:
        self.txn = txn
        self.db = db
        self._fids: dict[bytes, tuple[str, str]] = {}

    def exists(self, rel: str) -> bool:
        return self.txn.get(_b(rel), db=self.db["files"]) is not None

    def in_dir(self, rel_dir: str) -> list[str]:
        return self.dir_entries(rel_dir)[0]

    def dir_entries(self, rel_dir: str) -> tuple[list[str], list[str]]:
        """(the files directly in ``rel_dir``, its subfolders holding indexed files), as paths."""
        prefix = _b(rel_dir) + b"/" if rel_dir else b""
        files: list[str] = []
        folders: list[str] = []
        cursor = self.txn.cursor(db=self.db["files"])
        found = cursor.set_range(prefix)
        while found:
            key = cursor.key()
            if not key.startswith(prefix):
                break
            slash = key.find(b"/", len(prefix))
            if slash < 0:
                files.append(key.decode("utf-8", "surrogateescape"))
                found = cursor.next()
            else:  # skip the whole subdirectory: '0' sorts right after '/'
                folders.append(key[:slash].decode("utf-8", "surrogateescape"))
                found = cursor.set_range(key[:slash] + b"0")
        return files, folders

    def by_basename(self, name: str) -> list[str]:
        cursor = self.txn.cursor(db=self.db["base"])
        key = _b(name)
        if len(key) > MAX_KEY or not cursor.set_key(key):
            return []
        return [v.decode("utf-8", "surrogateescape") for v in cursor.iternext_dup()]

    def go_modules(self) -> list[tuple[str, str]]:
        cursor = self.txn.cursor(db=self.db["mods"])
        return [(k.decode("utf-8", "surrogateescape"), v.decode("utf-8", "replace")) for k, v in cursor]

    def file_of(self, fid4: bytes) -> tuple[str, str]:
        """(path, language) of a file id."""
        hit = self._fids.get(fid4)
        if hit is None:
            rel_b = self.txn.get(fid4, db=self.db["paths"]) or b""
            raw = self.txn.get(rel_b, db=self.db["files"]) if rel_b else None
            language = FileRecord.unpack(raw).language if raw else "text"
            hit = self._fids[fid4] = (rel_b.decode("utf-8", "surrogateescape"), language)
        return hit


def file_record(txn: lmdb.Transaction, db: dict, rel: str) -> FileRecord | None:
    raw = txn.get(_b(rel), db=db["files"])
    return FileRecord.unpack(raw) if raw else None


def _definition(path: str, language: str, raw: bytes) -> Definition:
    r = DefRecord(*loads(raw))
    return Definition(
        path=path,
        language=language,
        kind=r.kind,
        name=r.name,
        qualname=r.qualname,
        scope=r.scope,
        span=Span(r.start_line, r.start_col, r.end_line, r.end_col),
        signature=r.signature,
        doc=r.doc,
    )


def outline(txn: lmdb.Transaction, db: dict, rel: str) -> tuple[Definition, ...]:
    """Every definition of a file in source order (signatures only, never bodies)."""
    rec = file_record(txn, db, rel)
    if rec is None or not rec.n_defs:
        return ()
    fid4 = fid_bytes(rec.fid)
    cursor = txn.cursor(db=db["defs"])
    out: list[Definition] = []
    if cursor.set_range(fid4):
        for key, value in cursor:
            if key[:4] != fid4:
                break
            out.append(_definition(rel, rec.language, value))
    return tuple(out)


def identifiers(txn: lmdb.Transaction, db: dict, rel: str) -> tuple[str, ...]:
    rec = file_record(txn, db, rel)
    raw = txn.get(fid_bytes(rec.fid), db=db["text"]) if rec else None
    if not raw:
        return ()
    spec = language_spec(rec.language)
    found = lexical.identifiers(raw, spec.keywords if spec is not None else frozenset())
    return tuple(word.decode("ascii") for word in found)


def _split_qualified(name: str) -> tuple[str, str]:
    """("Store.Get" -> "Get", ".Store.Get"); the suffix is matched against dotted qualified names."""
    dotted = name.replace("::", ".")
    last = dotted.rsplit(".", 1)[-1]
    return last, ("." + dotted if "." in dotted else "")


def definitions(
    txn: lmdb.Transaction, db: dict, name: str, *, prefix: bool = False, limit: int = 50
) -> tuple[Definition, ...]:
    """Definitions named ``name`` (or qualified ``Type.name`` / ``ns::Type::name``), or starting with
    it when ``prefix``; at most ``limit`` (the first ones indexed), ordered by path then line."""
    short, suffix = _split_qualified(name)
    key = _b(short)
    if not key or len(key) > MAX_KEY:
        return ()
    files = TxnFiles(txn, db)
    cursor = txn.cursor(db=db["names"])
    refs: list[bytes] = []
    if prefix and not suffix:
        found = cursor.set_range(key)
        while found and len(refs) < limit * 4:
            if not cursor.key().startswith(key):
                break
            refs.append(cursor.value())
            found = cursor.next()
    elif cursor.set_key(key):
        refs = list(cursor.iternext_dup())
        if not suffix:
            refs = refs[:limit]  # a name like __init__ can have thousands: decode only what is returned
    out: list[Definition] = []
    for ref in refs:
        raw = txn.get(ref, db=db["defs"])
        if raw is None:
            continue
        path, language = files.file_of(ref[:4])
        d = _definition(path, language, raw)
        if suffix and not ("." + d.qualname.replace("::", ".")).endswith(suffix):
            continue
        out.append(d)
        if len(out) >= limit:
            break
    out.sort(key=lambda d: (d.path, d.span.start_line))
    return tuple(out[:limit])


def imports_of(txn: lmdb.Transaction, db: dict, rel: str) -> tuple[Import, ...]:
    """The imports of a file, each resolved against the files indexed right now."""
    rec = file_record(txn, db, rel)
    if rec is None:
        return ()
    raw = txn.get(fid_bytes(rec.fid), db=db["imports"])
    if not raw:
        return ()
    files = TxnFiles(txn, db)
    out = []
    for flavor, spec, names, line, wildcard in loads(raw):
        targets = resolve(rec.language, rel, flavor, spec, tuple(names), wildcard, files)
        out.append(Import(rel, line, spec, tuple(names), tuple(t for t in targets if t != rel)))
    return tuple(out)


def resolve_spec(txn: lmdb.Transaction, db: dict, rel: str, spec: str) -> tuple[str, ...]:
    """What ``spec``, written in a ``from`` import of the indexed file ``rel``, resolves to now:
    the resolution ``imports_of`` gives, for an import the file does not hold yet."""
    rec = file_record(txn, db, rel)
    if rec is None:
        return ()
    targets = resolve(rec.language, rel, "from", spec, (), False, TxnFiles(txn, db))
    return tuple(t for t in targets if t != rel)


def _lines_near(
    txn: lmdb.Transaction, db: dict, fid4: bytes, line: int, radius: int
) -> tuple[list[bytes], int]:
    """The lines of the blocks around ``line`` and the index of ``line`` among them (a big file is
    not split whole on every keystroke)."""
    data = txn.get(fid4, db=db["text"]) or b""
    raw = txn.get(fid4, db=db["blocks"])
    blocks = [b for b in loads(raw) if b[1] > line - radius and b[0] <= line + radius] if raw else []
    if not blocks:
        return data.split(b"\n"), line
    return data[blocks[0][2] : blocks[-1][3]].split(b"\n"), line - blocks[0][0]


def _words_near(lines: list[bytes], line: int, radius: int, keywords: frozenset[str]) -> list[str]:
    """Identifiers within ``radius`` lines of ``line``, nearest lines first, each once."""
    line = min(max(line, 0), max(len(lines) - 1, 0))
    order = [line]
    for step in range(1, radius + 1):
        order += [n for n in (line - step, line + step) if 0 <= n < len(lines)]
    seen: dict[str, None] = {}
    for n in order:
        for word in lexical.words(lines[n]):
            text = word.decode("ascii")
            if len(text) > 1 and text not in keywords:
                seen.setdefault(text, None)
        if len(seen) >= _NEAR_IDENTIFIERS:
            break
    return list(seen)[:_NEAR_IDENTIFIERS]


def _family(language: str) -> str:
    return _FAMILY.get(language, language)


def _refs(cursor: lmdb.Cursor, key: bytes, fids: list[bytes]) -> list[bytes]:
    """References (fid + idx) to definitions named ``key`` inside the given files, by seeking to
    each file's range among the name's duplicates: common names (``__init__``, ``get``) can have
    thousands of definitions, of which only those few files matter."""
    out: list[bytes] = []
    for fid4 in fids:
        if not cursor.set_range_dup(key, fid4):
            continue
        while True:
            ref = cursor.value()
            if ref[:4] != fid4:
                break
            out.append(ref)
            if not cursor.next_dup():
                break
    return out


def symbols_near(
    txn: lmdb.Transaction, db: dict, rel: str, line: int, *, radius: int = 12, limit: int = 24
) -> SymbolsNear:
    """Enclosing definitions of ``line`` and the definitions its surroundings refer to."""
    rec = file_record(txn, db, rel)
    if rec is None:
        return SymbolsNear(rel, line, (), ())
    local = outline(txn, db, rel)
    enclosing = tuple(d for d in local if d.span.contains_line(line))
    spec = language_spec(rec.language)
    lines, at = _lines_near(txn, db, fid_bytes(rec.fid), line, radius)
    words = _words_near(lines, at, radius, spec.keywords if spec else frozenset())
    files = TxnFiles(txn, db)
    imported: list[bytes] = []
    for target in dict.fromkeys(t for imp in imports_of(txn, db, rel) for t in imp.targets):
        target_rec = file_record(txn, db, target)
        if target_rec is not None:
            imported.append(fid_bytes(target_rec.fid))
    own = [fid_bytes(rec.fid)]
    family = _family(rec.language)
    skip = {(d.path, d.span.start_line) for d in enclosing}
    cursor = txn.cursor(db=db["names"])
    ranked: list[tuple[int, int, Definition]] = []
    for distance, word in enumerate(words):
        key = _b(word)
        if len(key) > MAX_KEY or not cursor.set_key(key):
            continue
        count = cursor.count()
        tier, refs = 0, _refs(cursor, key, imported)
        if not refs:
            tier, refs = 1, _refs(cursor, key, own)
        if not refs and count <= _AMBIGUOUS:
            cursor.set_key(key)
            tier, refs = 2, list(cursor.iternext_dup())
        for ref in refs:
            raw = txn.get(ref, db=db["defs"])
            if raw is None:
                continue
            path, language = files.file_of(ref[:4])
            if tier == 2 and _family(language) != family:
                continue
            d = _definition(path, language, raw)
            if (d.path, d.span.start_line) not in skip:
                ranked.append((tier, distance, d))
    ranked.sort(key=lambda item: (item[0], item[1]))
    seen: set[tuple[str, int]] = set()
    referenced: list[Definition] = []
    for _, _, d in ranked:
        key2 = (d.path, d.span.start_line)
        if key2 not in seen:
            seen.add(key2)
            referenced.append(d)
    return SymbolsNear(rel, line, enclosing, tuple(referenced[:limit]))
