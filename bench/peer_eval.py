"""The peer's row beside fimble's, on the same cases.

llama.cpp's ``llama-server``, asked as llama.vim asks, at every place ``fimble eval`` asked.

``fimble eval --out DIR`` writes ``DIR/cases.jsonl``: each cursor position with the masked file, the
cursor and the truth. Here each position is asked of llama.cpp's own ``llama-server``
(``bench/peer/llama_vim.py``) in the session's order, one server process per mode, so its KV cache is
carried from case to case as an editor session carries it; the positions marked ``revisited`` are
asked again at the end, as the served run asks them. Two modes:

* ``local``: llama.vim's local window only (256 lines above, 64 below), ``input_extra`` empty.
* ``bm25``: the same plus 4 chunks from the repository chosen by BM25 (the request that asked for this
  benchmark: "the same + 4 BM25 chunks from the repository"). The chunks come from fimble's own
  lexical index (``WorkspaceIndex.search``: 24-line windows, BM25 over 12-line blocks) queried with
  the 12 lines above the cursor and the cursor line up to the cursor, as fimble's context selection
  queries it, leaving out windows overlapping the lines the local window already shows. The masked
  file is given to the index as a buffer before the query, so the hidden line cannot leak, and
  restored after.

The index is a private one (a scratch ``FIMBLE_HOME``, removed at the end): masking writes into the
index, and the shared one under ``~/.cache/fimble`` may be open for writing by a running
``fimble eval`` or an editor's server on the same sources.

Answers are what llama.vim shows (``llama_vim.render``), scored on their first line with
``fimble.evaluation.metrics.score``, as fimble's served answers are. When ``served.jsonl`` lies beside
the cases, fimble's served answers at the same positions are summarized the same way and printed
beside the peer's.

    .venv/bin/fimble eval --pypi requests==2.32.3 --samples 12 --out DIR
    python bench/peer_eval.py --cases DIR/cases.jsonl [--model qwen2.5-coder-1.5b] [--limit N]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from fimble.errors import FimbleError, InputError
from fimble.evaluation.cases import POSITIONS
from fimble.evaluation.metrics import first_line, percentile, score
from fimble.evaluation.served_report import GROUPS, VISITS, wilson

try:
    from bench.peer import llama_vim
except ImportError:  # run as a script: bench/ is not importable, its peer/ folder is
    sys.path.insert(0, str(Path(__file__).resolve().parent / "peer"))
    import llama_vim  # type: ignore[no-redef]

__all__ = ["MODES", "N_CHUNKS", "QUERY_LINES", "bm25_chunks", "load_cases", "main", "summary", "table"]

MODES = ("local", "bm25")
N_CHUNKS = 4
QUERY_LINES = 12  # lines above the cursor in the BM25 query, as fimble.completion.context.gather asks
_ROOT = Path(__file__).resolve().parents[1]
Row = dict[str, Any]
_TIMINGS = ("prompt_n", "cache_n", "predicted_n", "prompt_ms", "predicted_ms", "stop_type", "truncated")


def load_cases(path: Path, limit: int | None = None) -> tuple[list[Row], list[Row]]:
    """The session (cases in ``order``, the first ``limit`` of them) and the revisits among them."""
    try:
        with open(path, encoding="utf-8") as f:
            cases = [json.loads(line) for line in f if line.strip()]
    except (OSError, json.JSONDecodeError) as err:
        hint = "pass the cases.jsonl that `fimble eval --out DIR` wrote"
        raise InputError(f"cannot read {path} ({err}); {hint}") from None
    session = sorted(cases, key=lambda c: c["order"])[: limit or None]
    return session, [c for c in session if c["revisited"]]


def source_root(source: str) -> Path:
    """The original tree of a case's ``source``: a folder, or the sdist of ``[pypi:]NAME==VERSION``."""
    if Path(source).is_dir():
        return Path(source)
    spec = source.removeprefix("pypi:")
    if "==" not in spec:
        raise InputError(f"the cases' source {source!r} is neither a folder nor NAME==VERSION")
    from fimble.evaluation.sources import fetch_sdist

    return fetch_sdist(spec)


def bm25_query(text: str, line: int) -> str:
    """The lines above the cursor and the cursor line (its masked rest is blank: up to the cursor)."""
    lines = text.split("\n")
    return "\n".join(lines[max(0, line - QUERY_LINES) : line + 1])


@contextlib.contextmanager
def _private_index(root: Path) -> Iterator[Any]:
    """``root``'s index, built in a scratch FIMBLE_HOME that is removed afterwards."""
    from fimble.indexer import WorkspaceIndex

    scratch = Path(tempfile.mkdtemp(prefix="fimble-peer-index-"))
    saved = os.environ.get("FIMBLE_HOME")
    os.environ["FIMBLE_HOME"] = str(scratch)  # read once, by open(): the store's folder
    try:
        index = WorkspaceIndex.open(root)
    finally:
        if saved is None:
            os.environ.pop("FIMBLE_HOME", None)
        else:
            os.environ["FIMBLE_HOME"] = saved
    try:
        index.build()
        yield index
    finally:
        index.close()
        shutil.rmtree(scratch, ignore_errors=True)


def bm25_chunks(index: Any, case: Row, k: int = N_CHUNKS) -> tuple[list[llama_vim.Chunk], list[Row]]:
    """The ``k`` best BM25 windows for ``case`` with its file masked in ``index``, as ``input_extra``
    chunks (best first) and a record of each (path, lines, score)."""
    line = case["line"]
    shown = (max(0, line - llama_vim.DEFAULT_N_PREFIX), line + llama_vim.DEFAULT_N_SUFFIX)
    index.update_buffer(case["path"], case["text"])
    index.flush()
    try:
        found = index.search(bm25_query(case["text"], line), k=k, exclude=(case["path"], shown))
    finally:
        index.update_file(case["path"])
        index.flush()
    chunks = [llama_vim.Chunk(s.path, s.text) for s in found]
    return chunks, [{"path": s.path, "lines": [s.start_line, s.end_line], "score": s.score} for s in found]


def _row(case: Row, visit: str, result: llama_vim.InfillResult | None, error: str | None) -> Row:
    raw = result.text if result else ""
    shown = llama_vim.render(raw, case["text"], case["offset"]) if result else [""]
    prediction = first_line(shown[0])
    sc = score(prediction, case["truth"])
    line = case["text"].split("\n")[case["line"]]
    blank = not line.strip(" \t")
    lead = len(raw) - len(raw.lstrip(" \t"))
    return {
        "id": case["id"], "order": case["order"], "path": case["path"], "position": case["position"],
        "visit": visit, "revisited": case["revisited"], "cross_file": case["cross_file"],
        "truth": case["truth"], "prediction": prediction, "raw_first_line": first_line(raw),
        "empty": not prediction.strip(), "exact": sc.exact, "edit_similarity": sc.edit_similarity,
        "identifier_f1": sc.identifier_f1,
        # on a blank line llama.vim's accept keeps the model's own indentation: less than the cursor's
        "indent_lost": bool(blank and prediction and lead < len(line)),
        "latency_ms": result.latency_ms if result else None,
        **{k: getattr(result, k) if result else None for k in _TIMINGS},
        **({"error": error} if error else {}),
    }  # fmt: skip


def run_mode(
    mode: str,
    session: Sequence[Row],
    revisits: Sequence[Row],
    chunks: dict[str, tuple[list[llama_vim.Chunk], list[Row]]],
    server: llama_vim.PeerServer,
    options: llama_vim.InfillOptions,
    on_row: Callable[[Row], None],
) -> None:
    """Every case, then every revisit, against one running server (its slot's cache carried on)."""
    seen: set[tuple[str, str, str]] = set()
    for visit, case in [(c["visit"], c) for c in session] + [("revisited", c) for c in revisits]:
        window = llama_vim.local_window(case["text"], case["offset"])
        extra, picked = chunks[case["id"]] if mode == "bm25" else ([], [])
        result, error = None, None
        try:
            result = server.infill(
                window,
                input_extra=extra,
                indent=llama_vim.n_indent(case["text"], case["offset"]),
                options=options,
            )
        except llama_vim.PeerError as err:
            error = str(err)
        row = _row(case, visit, result, error)
        # llama.vim's own result cache (keyed by the local window) would answer a window it has seen
        # without asking; the request is sent anyway, to measure the server's KV cache.
        row["llama_vim_cache_hit"] = tuple(window) in seen
        seen.add(tuple(window))
        if mode == "bm25":
            row["chunks"] = picked
        on_row(row)


def _stats(rows: Sequence[Row]) -> Row:
    answered = [r for r in rows if "error" not in r]
    exact = sum(bool(r["exact"]) for r in rows)
    lat = [float(r["latency_ms"]) for r in answered]

    def mean(key: str) -> float | None:
        xs = [float(r[key]) for r in answered if r.get(key) is not None]
        return round(sum(xs) / len(xs), 4) if xs else None

    return {
        "n": len(rows),
        "exact_match": round(exact / len(rows), 4) if rows else None,
        "exact_match_ci95": list(ci) if (ci := wilson(exact, len(rows))) else None,
        "edit_similarity": round(sum(r["edit_similarity"] for r in rows) / len(rows), 4) if rows else None,
        "empty_rate": round(sum(bool(r["empty"]) for r in rows) / len(rows), 4) if rows else None,
        "latency_p50_ms": round(percentile(lat, 50), 1) if lat else None,
        "latency_p90_ms": round(percentile(lat, 90), 1) if lat else None,
        # a mixture of fast and slow places (mid-line and line starts) has a p50 at whichever cluster
        # holds the middle row; the mean compares two such mixtures without that step
        "latency_mean_ms": round(sum(lat) / len(lat), 1) if lat else None,
        "prompt_n_mean": mean("prompt_n"),
        "cache_n_mean": mean("cache_n"),
        "errors": len(rows) - len(answered),
    }


def summary(system: str, rows: Sequence[Row]) -> list[Row]:
    """One entry per group (all / cross-file / same-file) x visit (first pass, cold, warm, revisited)
    x position (all, line start, mid-line), as ``fimble.evaluation.served_report`` groups them."""
    out: list[Row] = []
    for group in GROUPS:
        for visit in VISITS:
            for position in ("all", *POSITIONS):
                chosen = [
                    r for r in rows
                    if (group == "all" or bool(r["cross_file"]) == (group == "cross_file"))
                    and (r["visit"] != "revisited" if visit == "first_pass" else r["visit"] == visit)
                    and position in ("all", r["position"])
                ]  # fmt: skip
                out.append(
                    {"system": system, "group": group, "visit": visit, "position": position, **_stats(chosen)}
                )
    return out


def fimble_rows(path: Path, ids: set[str]) -> dict[str, list[Row]]:
    """fimble's served answers (``served.jsonl``) at these case ids, per model x think time x request,
    in the row shape ``summary`` reads."""
    out: dict[str, list[Row]] = {}
    with open(path, encoding="utf-8") as f:
        for r in map(json.loads, f):
            if r.get("case") not in ids:
                continue
            name = f"fimble {_short(r['model'])} {r['request']} think {r['think_ms']}"
            server = r.get("server") or {}  # fimble's counts under the peer's names
            row = {**r, "prompt_n": server.get("tokens_evaluated"), "cache_n": server.get("tokens_reused")}
            out.setdefault(name, []).append(row)
    return out


def _short(model: str) -> str:
    """A model's name from its name or path (``Path.stem`` would cut ``qwen2.5-coder-1.5b`` at ``.5b``)."""
    return model.rsplit("/", 1)[-1].removesuffix(".gguf")


_HEAD = (
    "system",
    "group",
    "visit",
    "position",
    "n",
    "exact (95% CI)",
    "edit sim",
    "empty",
    "p50 ms",
    "p90 ms",
    "mean ms",
    "prompt_n",
)


def table(entries: Sequence[Row], full: bool = False) -> str:
    """Entries with answers, the systems side by side for each group x visit (and position: every one
    with ``full``, else only the first pass of all lines is split by position)."""
    order: dict[str, int] = {}
    for e in entries:
        order.setdefault(e["system"], len(order))
    shown = (
        e for e in entries
        if e["n"] and (full or e["position"] == "all" or (e["group"], e["visit"]) == ("all", "first_pass"))
    )  # fmt: skip
    keyed = sorted(
        shown,
        key=lambda e: (GROUPS.index(e["group"]), VISITS.index(e["visit"]),
                       ("all", *POSITIONS).index(e["position"]), order[e["system"]]),
    )  # fmt: skip

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{100 * x:.0f}%"

    def num(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    rows = [_HEAD]
    for e in keyed:
        ci = e["exact_match_ci95"]
        exact = pct(e["exact_match"]) + (f" ({100 * ci[0]:.0f}-{100 * ci[1]:.0f})" if ci else "")
        rows.append(
            (
                e["system"],
                e["group"].replace("_", "-"),
                e["visit"],
                e["position"].replace("_", "-"),
                str(e["n"]),
                exact,
                pct(e["edit_similarity"]),
                pct(e["empty_rate"]),
                num(e["latency_p50_ms"]),
                num(e["latency_p90_ms"]),
                num(e.get("latency_mean_ms")),
                num(e.get("prompt_n_mean")),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(_HEAD))]
    return "\n".join(
        "  ".join(
            c.ljust(w) if i < 4 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    )


def _machine() -> Row:
    """The CPU and how busy it is: on a shared machine the load decides latencies more than anything."""
    cpu = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    return {"cpu": cpu, "logical_cpus": os.cpu_count(), "load_start": list(os.getloadavg())}


def run(args: argparse.Namespace) -> Row:
    from fimble.models.store import resolve

    started, machine = time.time(), _machine()
    session, revisits = load_cases(args.cases, args.limit)
    if not session:
        raise InputError(f"{args.cases} has no cases")
    sources = {c["source"] for c in session}
    if len(sources) != 1:
        raise InputError(f"{args.cases} mixes sources {sorted(sources)}; one source per run")
    model_path = resolve(args.model)
    chunks: dict[str, tuple[list[llama_vim.Chunk], list[Row]]] = {}
    root = None
    if "bm25" in args.modes:
        root = source_root(sources.pop())
        with _private_index(root) as index:
            for case in session:
                chunks[case["id"]] = bm25_chunks(index, case)
    options = llama_vim.InfillOptions(n_predict=args.n_predict)
    report: Row = {"meta": {}, "modes": {}}
    interrupted = False
    try:
        for mode in args.modes:
            entry: Row = {"rows": []}
            report["modes"][mode] = entry
            try:
                _run_server(mode, session, revisits, chunks, args, model_path, options, entry)
            except llama_vim.PeerError as err:  # this server failed: say so, and go on with the next
                entry["error"] = str(err)
    except KeyboardInterrupt:  # Ctrl-C: report what was measured so far
        interrupted = True
    for mode, entry in report["modes"].items():
        entry["summary"] = summary(f"peer {_short(str(model_path))} {mode}", entry["rows"])
    served = args.fimble or args.cases.with_name("served.jsonl")
    if served.is_file():
        theirs = fimble_rows(served, {c["id"] for c in session})
        if theirs and not any(_short(str(model_path)) in name for name in theirs):
            print(
                f"note: fimble's answers in {served} are from another model than the peer's", file=sys.stderr
            )
        report["fimble"] = {
            "file": str(served),
            "summary": [e for name, rs in theirs.items() for e in summary(name, rs)],
        }
    report["meta"] = {
        "cases": str(args.cases), "source": session[0]["source"], "root": str(root) if root else None,
        "n_cases": len(session), "n_revisits": len(revisits), "limit": args.limit, "modes": list(args.modes),
        "model": args.model, "model_path": str(model_path),
        "binary": str(args.binary or llama_vim.default_binary()),
        "n_predict": args.n_predict, "t_max_predict_ms": options.t_max_predict_ms,
        "bm25": {"k": N_CHUNKS,
                 "query": f"the {QUERY_LINES} lines above the cursor and the cursor line up to the cursor",
                 "exclude": "windows of the cursor's file overlapping the local window "
                 f"({llama_vim.DEFAULT_N_PREFIX} lines above, {llama_vim.DEFAULT_N_SUFFIX} below)",
                 "index": "fimble WorkspaceIndex.search, private index, masked file as a buffer"},
        "threads": next((e["server"]["threads"] for e in report["modes"].values() if "server" in e), None),
        "machine": {**machine, "load_end": list(os.getloadavg())},
        "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started)),
        "seconds": round(time.time() - started, 1),
        "interrupted": interrupted,
    }  # fmt: skip
    return report


def _run_server(
    mode: str,
    session: Sequence[Row],
    revisits: Sequence[Row],
    chunks: dict[str, tuple[list[llama_vim.Chunk], list[Row]]],
    args: argparse.Namespace,
    model_path: Path,
    options: llama_vim.InfillOptions,
    entry: Row,
) -> None:
    """One fresh llama-server for ``mode``'s session; rows go into ``entry`` as they come."""
    rows: list[Row] = entry["rows"]
    total = len(session) + len(revisits)

    def keep(row: Row) -> None:
        rows.append(row)
        ms = row["latency_ms"] or 0
        print(f"[{mode} {len(rows)}/{total}] {row['id']} {row['visit']:<9} exact={row['exact']!s:<5} "
              f"{ms:6.0f} ms  {row['prediction'][:60]!r}", file=sys.stderr)  # fmt: skip

    with llama_vim.PeerServer(model_path, binary=args.binary, threads=args.threads) as server:
        settings = server.props().get("default_generation_settings", {})
        entry["server"] = {"command": server.command, "threads": server.threads,
                           "n_ctx": settings.get("n_ctx")}  # fmt: skip
        run_mode(mode, session, revisits, chunks, server, options, keep)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=Path, required=True, help="cases.jsonl from `fimble eval --out DIR`")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b", help="model name or .gguf path")
    parser.add_argument("--threads", type=int, default=None, help="default: physical cores, like fimble")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: local, bm25")
    parser.add_argument("--out", type=Path, default=_ROOT / "bench" / "results" / "peer_eval.json")
    parser.add_argument("--limit", type=int, default=None, help="the first N cases (and their revisits)")
    parser.add_argument("--n-predict", type=int, default=48, help="tokens per answer (eval's --max-tokens)")
    parser.add_argument("--binary", type=Path, default=None, help="llama-server (default: build.sh's)")
    parser.add_argument("--fimble", type=Path, default=None, help="fimble's served.jsonl (default: beside)")
    parser.add_argument("--full-table", action="store_true", help="print every group x visit x position")
    args = parser.parse_args(argv)
    args.modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    if not args.modes or any(m not in MODES for m in args.modes):
        parser.error(f"--modes takes a comma-separated subset of {', '.join(MODES)}")
    try:
        report = run(args)
    except (FimbleError, llama_vim.PeerError) as err:
        print(f"peer_eval: {err}", file=sys.stderr)
        return 1
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    entries = [e for m in report["modes"].values() for e in m["summary"]]
    print(table(entries + report.get("fimble", {}).get("summary", []), full=args.full_table))
    for mode, entry in report["modes"].items():
        if "error" in entry:
            print(f"peer {mode} failed: {entry['error']}", file=sys.stderr)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
