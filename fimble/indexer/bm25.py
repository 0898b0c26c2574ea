"""BM25 search over the postings segments: the text windows of the workspace most like a query.

For each query term: one key per segment (its hash bucket), a binary search for the term, and the
term's entries as numpy views: (fid, block, tf, block length). Scores are computed per block with
Okapi BM25 (block-level document frequency and average length), a window's score is the sum of its
two blocks', and the best windows that do not overlap each other are returned with their text.
Everything per entry is vectorised, so a query costs a few hundred numpy calls whatever the size of
the workspace; terms are taken rarest first and scoring stops after ``budget`` entries, which only
drops the most common terms, whose IDF is near zero.

Entries of replaced file versions (the ``dead`` fids) stay in their segments until compaction. They
are flagged right after the lookup: document frequencies and the budget count live entries only, and
the flagged entries are masked before windows are scored, so an edited index ranks exactly like a
fresh build of the same files (the block count and total length in ``Stats`` already count live
versions only).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections import defaultdict
from itertools import accumulate
from operator import itemgetter

import lmdb
import numpy as np

from fimble.indexer import lexical, postings
from fimble.indexer.records import FileRecord, Stats, fid_bytes, loads
from fimble.indexer.types import Snippet

__all__ = ["K1", "B", "idf", "search"]

K1 = 1.2
B = 0.75
_MAX_QUERY_TERMS = 64


def idf(n_docs: int, df: int) -> float:
    """Okapi BM25 IDF with the +1 that keeps it positive for very common terms."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def _gather(txn: lmdb.Transaction, db: dict, terms: list[bytes]) -> dict[int, list[tuple[np.ndarray, ...]]]:
    """term index -> [(fids, blocks, tfs, lens) per segment holding the term]."""
    wanted: dict[int, list[tuple[int, int]]] = defaultdict(list)  # bucket -> [(term index, term id)]
    for i, term in enumerate(terms):
        term_id = lexical.term_hash(term)
        wanted[postings.bucket_of(term_id)].append((i, term_id))
    found: dict[int, list[tuple[np.ndarray, ...]]] = defaultdict(list)
    cursor = txn.cursor(db=db["post"])
    for bucket in sorted(wanted):
        prefix = bucket.to_bytes(2, "big")
        ok = cursor.set_range(prefix)
        while ok:
            key, value = cursor.item()
            if key[:2] != prefix:
                break
            terms_here = wanted[bucket]
            hits = postings.find_terms(value, [term_id for _, term_id in terms_here])
            for (i, _), hit in zip(terms_here, hits, strict=True):
                if hit is not None:
                    found[i].append(hit)
            ok = cursor.next()
    return found


def _dead(txn: lmdb.Transaction, db: dict) -> np.ndarray:
    """The fids whose postings are stale, sorted (the writer appends them in death order)."""
    raw = txn.get(b"dead", db=db["meta"])
    return np.sort(np.frombuffer(raw, np.uint32)) if raw else np.empty(0, np.uint32)


def _stale(
    found: dict[int, list[tuple[np.ndarray, ...]]], dead: np.ndarray
) -> tuple[dict[int, int], dict[int, np.ndarray]]:
    """Per term, its live entries (its document frequency), and the flags (1: stale) of its entries
    in the order of its parts, for the terms that have stale ones.

    One lookup in a dead-fid bitmap over the fids of every part at once and one cumulative sum: a
    few numpy calls whatever the number of (term, segment) parts a query reads (about a hundred);
    per-part calls cost more than the whole search's scoring.
    """
    sizes = {i: sum(len(part[0]) for part in parts) for i, parts in found.items()}
    if not len(dead):
        return sizes, {}
    bitmap = np.zeros(int(dead[-1]) + 2, np.uint8)  # the last slot stays 0: where clipped fids land
    bitmap[dead] = 1
    flags = bitmap.take(np.concatenate([part[0] for parts in found.values() for part in parts]), mode="clip")
    bounds = list(accumulate(sizes.values(), initial=0))  # each term's entries, parts in order
    stale_before = np.concatenate(([0], np.cumsum(flags, dtype=np.int64)))[bounds].tolist()
    live: dict[int, int] = {}
    term_flags: dict[int, np.ndarray] = {}
    for t, i in enumerate(sizes):
        stale = stale_before[t + 1] - stale_before[t]
        live[i] = sizes[i] - stale
        if stale:
            term_flags[i] = flags[bounds[t] : bounds[t + 1]]
    return live, term_flags


def _excluded(
    txn: lmdb.Transaction, db: dict, exclude: tuple[str, tuple[int, int]] | None
) -> tuple[int, list[int]]:
    """(fid, window numbers) to leave out: windows of that file overlapping the line range."""
    if exclude is None:
        return -1, []
    rel, (first, last) = exclude
    raw = txn.get(rel.encode("utf-8", "surrogateescape"), db=db["files"])
    if raw is None:
        return -1, []
    fid = FileRecord.unpack(raw).fid
    raw_blocks = txn.get(fid_bytes(fid), db=db["blocks"])
    return fid, _overlapping(loads(raw_blocks) if raw_blocks else [], first, last)


def _overlapping(blocks: list[tuple[int, int, int, int]], first: int, last: int) -> list[int]:
    """Numbers of the windows overlapping lines [first, last] (and of the clamped last one)."""
    if len(blocks) <= 1:
        windows = _windows(blocks)
        skip = [w for w, (start, end, _, _) in enumerate(windows) if start <= last and end >= first]
        n_windows = len(windows)
    else:
        # Window w covers lines blocks[w][0] .. blocks[w + 1][1] - 1: both ends grow with w, so the
        # windows overlapping [first, last] are a run, found by bisection (a big file has thousands).
        n_windows = len(blocks) - 1
        low = bisect_right(blocks, first, lo=1, key=itemgetter(1)) - 1
        high = min(bisect_right(blocks, last, key=itemgetter(0)), n_windows)
        skip = list(range(low, high))
    if skip and skip[-1] == n_windows - 1:
        skip.append(n_windows)  # the last block alone also scores as a (clamped) window
    return skip


def _windows(blocks: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """Windows of a file as (first line, last line inclusive, start byte, end byte)."""
    if len(blocks) <= 1:
        return [(b[0], max(b[1] - 1, b[0]), b[2], b[3]) for b in blocks]
    return [
        (blocks[w][0], blocks[w + 1][1] - 1, blocks[w][2], blocks[w + 1][3]) for w in range(len(blocks) - 1)
    ]


def _window(blocks: list[tuple[int, int, int, int]], window: int) -> tuple[int, int, int, int]:
    """``_windows(blocks)[min(window, last)]`` without building every window of the file."""
    if len(blocks) <= 1:
        start_line, end_line, start, end = blocks[0]
        return start_line, max(end_line - 1, start_line), start, end
    w = min(window, len(blocks) - 2)
    return blocks[w][0], blocks[w + 1][1] - 1, blocks[w][2], blocks[w + 1][3]


def search(
    txn: lmdb.Transaction,
    db: dict,
    text: str,
    k: int = 5,
    *,
    exclude: tuple[str, tuple[int, int]] | None = None,
    budget: int = 20_000,
) -> tuple[Snippet, ...]:
    """The ``k`` best windows for ``text``, never two overlapping ones from the same file.

    ``exclude=(path, (first_line, last_line))`` drops windows of that file overlapping those lines
    (what the prompt already shows around the cursor).
    """
    stats = Stats.unpack(txn.get(b"stats", db=db["meta"]))
    if stats.blocks <= 0 or k <= 0:
        return ()
    terms = lexical.query_terms(text)[:_MAX_QUERY_TERMS]
    found = _gather(txn, db, terms)
    if not found:
        return ()
    df, stale = _stale(found, _dead(txn, db))
    n, avg = stats.blocks, max(stats.total_length / stats.blocks, 1.0)
    weighted = sorted(((idf(n, df[i]), i) for i in found if df[i]), reverse=True)
    if not weighted:
        return ()
    parts: list[tuple[np.ndarray, ...]] = []
    weights: list[float] = []
    counts: list[int] = []
    flags: list[np.ndarray] = []
    spent = 0
    for weight, i in weighted:  # rarest first; stop before a term that would blow the budget
        if spent and spent + df[i] > budget:
            break
        spent += df[i]
        for part in found[i]:
            parts.append(part)
            weights.append(weight)
            counts.append(len(part[0]))
        if stale:
            flags.append(stale[i] if i in stale else np.zeros(sum(len(p[0]) for p in found[i]), np.uint8))
    fids, blocks, tfs, lens = (np.concatenate([p[c] for p in parts]) for c in range(4))
    tf = tfs.astype(np.float32)
    norm = np.float32(K1 * (1 - B)) + np.float32(K1 * B / avg) * lens
    scores = np.repeat(np.asarray(weights, np.float32) * np.float32(K1 + 1), counts) * tf / (tf + norm)
    keys = (fids.astype(np.int64) << 16) | blocks
    if stale:
        live = np.concatenate(flags) == 0
        keys, scores = keys[live], scores[live]
    return _top_windows(txn, db, keys, scores, k, _excluded(txn, db, exclude))


def _group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys (sorted) and the sum of the values of each: one sort, no inverse index."""
    if not len(keys):
        return keys, values
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1))
    return keys[starts], np.add.reduceat(values.astype(np.float64), starts)


def _top_windows(
    txn: lmdb.Transaction,
    db: dict,
    keys: np.ndarray,
    scores: np.ndarray,
    k: int,
    exclude: tuple[int, list[int]],
) -> tuple[Snippet, ...]:
    block_keys, block_scores = _group_sum(keys, scores)
    # Window w = blocks w and w+1: a block scores for the window it starts and the one before it.
    has_prev = (block_keys & 0xFFFF) > 0
    window_keys, window_scores = _group_sum(
        np.concatenate((block_keys, block_keys[has_prev] - 1)),
        np.concatenate((block_scores, block_scores[has_prev])),
    )
    skip_fid, skip_windows = exclude
    if skip_windows:
        drop = np.isin(window_keys, (np.int64(skip_fid) << 16) | np.asarray(skip_windows, np.int64))
        window_scores[drop] = -1.0
    top = min(len(window_keys), k * 8)
    # Back in key order before the stable sort: equal scores then rank by (fid, window), not by
    # wherever argpartition left them, which changes with the layout of the postings (an edit, a merge).
    order = (
        np.sort(np.argpartition(-window_scores, top - 1)[:top])
        if top < len(window_keys)
        else np.arange(len(window_keys))
    )
    order = order[np.argsort(-window_scores[order], kind="stable")]
    picked: list[tuple[int, int, float]] = []
    taken: dict[int, list[int]] = defaultdict(list)
    for key, score in zip(window_keys[order].tolist(), window_scores[order].tolist(), strict=True):
        if score <= 0:
            break
        fid, window = key >> 16, key & 0xFFFF
        if any(abs(window - other) <= 1 for other in taken[fid]):
            continue  # neighbours share a block: keep the better one only
        taken[fid].append(window)
        picked.append((fid, window, score))
        if len(picked) == k:
            break
    return tuple(s for s in (_snippet(txn, db, *p) for p in picked) if s is not None)


def _snippet(txn: lmdb.Transaction, db: dict, fid: int, window: int, score: float) -> Snippet | None:
    fid4 = fid_bytes(fid)
    rel_b = txn.get(fid4, db=db["paths"])
    raw_blocks = txn.get(fid4, db=db["blocks"])
    if rel_b is None or raw_blocks is None:
        return None
    blocks = loads(raw_blocks)
    if not blocks:
        return None
    first, last, start, end = _window(blocks, window)
    rec_raw = txn.get(rel_b, db=db["files"])
    data = txn.get(fid4, db=db["text"]) or b""
    return Snippet(
        path=rel_b.decode("utf-8", "surrogateescape"),
        language=FileRecord.unpack(rec_raw).language if rec_raw else "text",
        start_line=first,
        end_line=last,
        text=data[start:end].decode("utf-8", "replace"),
        score=round(score, 4),
    )
