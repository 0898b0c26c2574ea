"""BM25 over the postings table: which text windows of the workspace look most like a query.

Postings are keyed ``term \\0 fid`` with packed (window, tf, window length) triples, so one range scan
per term yields every window containing it, lengths included: no per-window lookups while scoring.

To stay within a few milliseconds a query is bounded: terms are taken rarest first (highest IDF), and
scanning stops once ``budget`` postings were scored; terms found in more than ``common`` of all windows
are skipped outright. Both only drop terms whose IDF is small, i.e. the ones that barely move BM25.
"""

from __future__ import annotations

import heapq
import math
from array import array
from operator import itemgetter

import lmdb

from fimble.indexer import lexical
from fimble.indexer.records import MAX_KEY, FileRecord, Stats, fid_bytes, loads
from fimble.indexer.types import Snippet

__all__ = ["K1", "B", "idf", "search", "term_score"]

K1 = 1.2
B = 0.75
_MAX_QUERY_TERMS = 64


def idf(n_windows: int, df: int) -> float:
    """Okapi BM25 IDF with the +1 that keeps it positive for very common terms."""
    return math.log(1.0 + (n_windows - df + 0.5) / (df + 0.5))


def term_score(idf_value: float, tf: int, length: int, avg_length: float) -> float:
    return idf_value * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / avg_length))


def _excluded_windows(
    txn: lmdb.Transaction, db: dict, exclude: tuple[str, tuple[int, int]] | None
) -> tuple[int, set[int]]:
    if exclude is None:
        return -1, set()
    rel, (first, last) = exclude
    raw = txn.get(rel.encode("utf-8", "surrogateescape"), db=db["files"])
    if raw is None:
        return -1, set()
    fid = FileRecord.unpack(raw).fid
    raw_windows = txn.get(fid_bytes(fid), db=db["windows"])
    windows = loads(raw_windows) if raw_windows else []
    return fid, {i for i, (start, end, _, _) in enumerate(windows) if start <= last and end >= first}


def search(
    txn: lmdb.Transaction,
    db: dict,
    text: str,
    k: int = 5,
    *,
    exclude: tuple[str, tuple[int, int]] | None = None,
    budget: int = 12000,
    common: float = 0.25,
) -> tuple[Snippet, ...]:
    """The ``k`` best windows for ``text``, never two overlapping ones from the same file.

    ``exclude=(path, (first_line, last_line))`` drops windows of that file overlapping those lines
    (what the prompt already shows around the cursor).
    """
    stats = Stats.unpack(txn.get(b"stats", db=db["meta"]))
    if stats.windows <= 0 or k <= 0:
        return ()
    n = stats.windows
    avg = max(stats.total_length / n, 1.0)
    df_db = db["df"]
    weighted: list[tuple[float, bytes]] = []
    for term in lexical.query_terms(text)[:_MAX_QUERY_TERMS]:
        raw = txn.get(term, db=df_db)
        if raw is None:
            continue
        df = int.from_bytes(raw, "big")
        if df <= n * common:
            weighted.append((idf(n, df), term))
    weighted.sort(reverse=True)
    skip_fid, skip_windows = _excluded_windows(txn, db, exclude)
    scores: dict[int, float] = {}
    get = scores.get
    cursor = txn.cursor(db=db["post"])
    norm_a = K1 * (1 - B)
    norm_b = K1 * B / avg
    spent = 0
    for weight, term in weighted:
        prefix = term + b"\0"
        if len(prefix) + 4 > MAX_KEY or not cursor.set_range(prefix):
            continue
        boost = weight * (K1 + 1)
        for key, value in cursor:
            if len(key) != len(prefix) + 4 or not key.startswith(prefix):
                break
            fid = int.from_bytes(key[-4:], "big")
            base = fid << 16
            entries = array("H")
            entries.frombytes(value)
            spent += len(entries) // 3
            for window, tf, length in zip(entries[0::3], entries[1::3], entries[2::3], strict=True):
                if fid == skip_fid and window in skip_windows:
                    continue
                slot = base | window
                scores[slot] = get(slot, 0.0) + boost * tf / (tf + norm_a + norm_b * length)
        if spent >= budget:
            break
    return _snippets(txn, db, scores, k)


def _snippets(txn: lmdb.Transaction, db: dict, scores: dict[int, float], k: int) -> tuple[Snippet, ...]:
    picked: list[tuple[int, int, float]] = []
    taken: dict[int, list[int]] = {}
    for slot, score in heapq.nlargest(k * 4, scores.items(), key=itemgetter(1)):
        fid, window = slot >> 16, slot & 0xFFFF
        near = taken.setdefault(fid, [])
        if any(abs(window - other) <= 1 for other in near):
            continue  # neighbours overlap by half a window: keep the better one only
        near.append(window)
        picked.append((fid, window, score))
        if len(picked) == k:
            break
    out: list[Snippet] = []
    for fid, window, score in picked:
        fid4 = fid_bytes(fid)
        rel_b = txn.get(fid4, db=db["paths"])
        windows_raw = txn.get(fid4, db=db["windows"])
        if rel_b is None or windows_raw is None:
            continue
        start_line, end_line, start_byte, end_byte = loads(windows_raw)[window]
        rec_raw = txn.get(rel_b, db=db["files"])
        data = txn.get(fid4, db=db["text"]) or b""
        out.append(
            Snippet(
                path=rel_b.decode("utf-8", "surrogateescape"),
                language=FileRecord.unpack(rec_raw).language if rec_raw else "text",
                start_line=start_line,
                end_line=end_line,
                text=data[start_byte:end_byte].decode("utf-8", "replace"),
                score=round(score, 4),
            )
        )
    return tuple(out)
