"""Typing replay through the LSP server: what each keystroke costs an editor user.

Starts ``fimble serve`` over stdio with a real LSP client (pygls; no client-side cache), opens files
of a real project (a PyPI sdist, fetched once with pip), and types real lines one character at a
time: ``didChange`` with the character, then ``textDocument/inlineCompletion`` at the cursor, as an
editor does. Lines are typed in the order file 1, file 2, file 3, file 1 again, ..., so the second
line of each file measures coming back to a file after a switch. Then the server is restarted on
the same cache directory and the first lines are typed again (the persistent caches), plus a line
never typed before in a file seen before, and the line after the last one typed in the last file
(going on where you left off).

Per keystroke: latency from sending the request to the response, and how the server answered
(``fimble.status`` after each response: stop reason — typed_through, cached, adopted or a model
stop — and tokens evaluated). Also: the server's RSS after the replay against a process holding
the engine alone, and the size of the cache directories.

Arriving at a line, the client sends ``textDocument/didFocus`` with the cursor and pauses
``--think-ms`` (default 1,000 ms) before typing, as fimble's editor plugins and people do; with 0 it
types at once and sends no focus.

With ``--pace-ms N`` keystrokes arrive every N ms whether or not the previous suggestion came back
(the older request is cancelled with ``$/cancelRequest``, as VS Code does), which exercises adopting
an in-flight generation. Writes JSON (default ``bench/results/typing.json``). Run under the CPU lock:
``flock /tmp/team/cpu.lock .venv/bin/python bench/typing_replay.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient

FILES = ("src/requests/sessions.py", "src/requests/models.py", "src/requests/utils.py")
MODEL_STOPS_WITHOUT_MODEL = {"typed_through", "cached", "adopted"}


def _sdist(spec: str) -> Path:
    try:
        from fimble.evaluation.sources import fetch_sdist
    except ImportError:  # the evaluation package is optional here: the same pip call
        fetch_sdist = None
    if fetch_sdist is not None:
        return fetch_sdist(spec)
    from fimble.paths import cache_root

    name, version = spec.split("==")
    dest = cache_root() / "bench-sources"
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / f"{name.lower()}-{version}"
    if not out.is_dir():
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-binary",
                ":all:",
                "--no-deps",
                "-q",
                "-d",
                str(dest),
                spec,
            ],
            check=True,
        )
        archive = next(dest.glob(f"{name.lower()}-{version}.tar.gz"))
        subprocess.run(["tar", "-xzf", str(archive), "-C", str(dest)], check=True)
    return out


def _pick_lines(rng: random.Random, text: str, n: int) -> list[int]:
    lines = text.split("\n")
    candidates = [
        i
        for i, ln in enumerate(lines)
        if 20 <= len(ln.strip()) <= 60 and i > 30 and not ln.strip().startswith(("#", '"', "'"))
    ]
    return sorted(rng.sample(candidates, n))


def _next_lines(text: str, first: int, n: int) -> list[int]:
    """``first`` and the ``n - 1`` lines with code that follow it (``--back-to next``)."""
    lines = text.split("\n")
    out = [first]
    i = first
    while len(out) < n and i + 1 < len(lines):
        i += 1
        if len(lines[i].strip()) >= 8 and not lines[i].strip().startswith("#"):
            out.append(i)
    return out


def _pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, int(q * len(values)))], 1)


def _rss_mb(pid: int) -> float:
    import psutil

    return round(psutil.Process(pid).memory_info().rss / 2**20, 1)


def _dir_mb(path: Path) -> float:
    if not path.exists():
        return 0.0
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20, 2)


class Session:
    """One server process and one client connection."""

    def __init__(self, model: str, home: Path, root: Path, options: dict[str, Any]) -> None:
        self.model, self.home, self.root, self.options = model, home, root, options
        self.client = LanguageClient("fimble-bench", "1")
        self.versions: dict[str, int] = {}

    async def start(self) -> None:
        env = {**os.environ, "FIMBLE_HOME": str(self.home)}
        await self.client.start_io(sys.executable, "-m", "fimble", "serve", "-m", self.model, env=env)
        await self.client.initialize_async(
            types.InitializeParams(
                capabilities=types.ClientCapabilities(),
                initialization_options=self.options,
                root_uri=self.root.as_uri(),
                workspace_folders=[types.WorkspaceFolder(uri=self.root.as_uri(), name=self.root.name)],
            )
        )
        self.client.initialized(types.InitializedParams())
        while (await self.status())["model"]["state"] == "loading":
            await asyncio.sleep(0.1)

    @property
    def pid(self) -> int:
        return self.client._server.pid  # type: ignore[union-attr]

    async def status(self) -> dict[str, Any]:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="fimble.status")
        )

    def open(self, uri: str, text: str) -> None:
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, text))
        )

    def close(self, uri: str) -> None:
        self.client.text_document_did_close(
            types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(uri))
        )

    def type_char(self, uri: str, line: int, col: int, ch: str) -> None:
        self.versions[uri] += 1
        at = types.Position(line, col)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text=ch)],
            )
        )

    def focus(self, uri: str, line: int, col: int) -> None:
        """Where the cursor went, as fimble's editor plugins say it (``textDocument/didFocus``)."""
        self.client.protocol.notify(
            "textDocument/didFocus",
            {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}},
        )

    def request(self, uri: str, line: int, col: int) -> asyncio.Future[Any]:
        params = types.InlineCompletionParams(
            context=types.InlineCompletionContext(trigger_kind=types.InlineCompletionTriggerKind.Automatic),
            text_document=types.TextDocumentIdentifier(uri),
            position=types.Position(line, col),
        )
        return self.client.text_document_inline_completion_async(params)

    async def stop(self) -> None:
        await self.client.shutdown_async(None)
        self.client.exit(None)
        await self.client.stop()


def _first_text(result: Any) -> str:
    items = result.items if result is not None else []
    if not items:
        return ""
    text = items[0].insert_text
    return text if isinstance(text, str) else getattr(text, "value", "")


async def _keystroke(s: Session, uri: str, line: int, col: int, label: str, rest: str) -> dict[str, Any]:
    """One request at the cursor; ``rest`` is what the user goes on to type on that line, so the
    suggestion was right when its first line is exactly that (the issue's "rest of the line")."""
    t = time.perf_counter()
    result = await s.request(uri, line, col)
    ms = (time.perf_counter() - t) * 1000
    last = (await s.status())["last"]
    engine = last.get("engine") or {}
    items = result.items if result is not None else []
    text = _first_text(result)
    return {
        "label": label,
        "ms": round(ms, 1),
        # Without a result (deadline while reading the prompt) ``engine`` is the previous request's.
        "how": last.get("outcome")
        if last.get("outcome") == "deadline_prompt"
        else engine.get("stop_reason", "none"),
        "evaluated": engine.get("tokens_evaluated", 0),
        "shown": bool(items),
        "rest_exact": bool(rest.strip()) and text.split("\n", 1)[0].rstrip() == rest.rstrip(),
    }


async def _type_line(
    s: Session,
    uri: str,
    text: str,
    index: int,
    label: str,
    pace_ms: int,
    limit: int | None = None,
    think_ms: int = 0,
) -> list[dict[str, Any]]:
    """Type line ``index`` of ``text`` (already blanked in the open document) after its indent.

    With ``think_ms``, the cursor arrives first (``didFocus``, as the editor plugins send it) and
    the user pauses that long before the first request, as people do before typing somewhere new."""
    line = text.split("\n")[index]
    indent = len(line) - len(line.lstrip())
    if think_ms > 0:
        s.focus(uri, index, indent)
        await asyncio.sleep(think_ms / 1000)
    cols = range(indent, len(line))
    if limit is not None:
        cols = range(indent, min(len(line), indent + limit))
    out: list[dict[str, Any]] = []
    if pace_ms <= 0:
        out.append(await _keystroke(s, uri, index, indent, label, line[indent:]))
        for col in cols:
            s.type_char(uri, index, col, line[col])
            out.append(await _keystroke(s, uri, index, col + 1, "typed", line[col + 1 :]))
        return out
    # Paced: a keystroke every pace_ms; an unanswered older request is cancelled by the client.
    pending: list[tuple[float, asyncio.Future[Any], str, int]] = []
    positions = [indent, *[c + 1 for c in cols]]
    for n, col in enumerate(positions):
        if n:
            s.type_char(uri, index, col - 1, line[col - 1])
        for _t, fut, _l, _c in pending:
            if not fut.done():
                fut.cancel()
        pending.append((time.perf_counter(), s.request(uri, index, col), label if n == 0 else "typed", col))
        await asyncio.sleep(pace_ms / 1000)
    for started, fut, lab, col in pending:
        try:
            result = await fut
            ms = (time.perf_counter() - started) * 1000
            rest = line[col:]
            out.append(
                {
                    "label": lab,
                    "ms": round(ms, 1),
                    "how": "answered",
                    "evaluated": None,
                    "shown": bool(result and result.items),
                    "rest_exact": bool(rest.strip())
                    and _first_text(result).split("\n", 1)[0].rstrip() == rest.rstrip(),
                }
            )
        except (asyncio.CancelledError, Exception):
            out.append(
                {
                    "label": lab,
                    "ms": None,
                    "how": "cancelled",
                    "evaluated": None,
                    "shown": False,
                    "rest_exact": False,
                }
            )
    return out


def _until_shown(typed: list[dict[str, Any]]) -> dict[str, Any]:
    """Time spent in requests, and keystrokes typed, until the first suggestion was shown."""
    spent = 0.0
    for n, k in enumerate(typed):
        spent += k["ms"] or 0.0
        if k["shown"]:
            return {"until_shown_ms": round(spent, 1), "keystrokes_until_shown": n}
    return {"until_shown_ms": None, "keystrokes_until_shown": None}


def _blank(text: str, index: int) -> str:
    lines = text.split("\n")
    ln = lines[index]
    lines[index] = ln[: len(ln) - len(ln.lstrip())]
    return "\n".join(lines)


def _engine_alone_rss(model: str, n_ctx: int) -> float:
    """RSS of a process holding only the engine after one short generation."""
    code = (
        "import sys, psutil\n"
        "from fimble.completion.engine import Engine, EngineConfig\n"
        f"e = Engine({model!r}, EngineConfig(n_ctx={n_ctx}))\n"
        "e.generate(e.tokenize('def add(a, b):\\n    return' * 40), max_tokens=8)\n"
        "print(psutil.Process().memory_info().rss)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return round(int(out.stdout.strip().splitlines()[-1]) / 2**20, 1)


def _summary(keys: list[dict[str, Any]]) -> dict[str, Any]:
    typed = [k for k in keys if k["label"] == "typed" and k["ms"] is not None]
    hows = Counter(k["how"] for k in typed)
    n = len(typed) or 1
    evaluated = [k["evaluated"] for k in typed if k["evaluated"] is not None]
    return {
        "keystrokes": len(typed),
        "latency_ms": {
            q: _pct([k["ms"] for k in typed], v) for q, v in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
        },
        "tokens_evaluated": {
            "mean": round(statistics.mean(evaluated), 1) if evaluated else None,
            "p50": _pct(evaluated, 0.5),
            "p90": _pct(evaluated, 0.9),
        },
        "typed_through_rate": round(hows["typed_through"] / n, 3),
        "cache_hit_rate": round(hows["cached"] / n, 3),
        "adopted_rate": round(hows["adopted"] / n, 3),
        "without_model_rate": round(sum(hows[h] for h in MODEL_STOPS_WITHOUT_MODEL) / n, 3),
        # The suggestion's first line was exactly the rest of the line being typed.
        "rest_of_line_exact_rate": round(sum(1 for k in typed if k.get("rest_exact")) / n, 3),
        "answered_by": dict(hows),
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from fimble.models import store

    load_at_start = [round(x, 2) for x in os.getloadavg()]  # others' work skews the numbers: say so
    model = str(store.resolve(args.model))
    root = _sdist(args.pypi)
    home = Path(tempfile.mkdtemp(prefix="fimble-typing-"))
    rng = random.Random(args.seed)
    files = [root / f for f in FILES[: args.files]]
    texts = {f: f.read_text() for f in files}
    picks = {f: _pick_lines(rng, texts[f], args.lines_per_file) for f in files}
    if args.back_to == "next":  # the same first lines (same draws), then the lines after them
        picks = {f: _next_lines(texts[f], p[0], args.lines_per_file) for f, p in picks.items()}
    options = {"maxTokens": args.max_tokens}
    keys: list[dict[str, Any]] = []
    firsts: list[dict[str, Any]] = []

    s = Session(model, home, root, options)
    t = time.perf_counter()
    await s.start()
    load_s = time.perf_counter() - t
    for round_no in range(args.lines_per_file):  # file 1, 2, 3, then back to file 1, ...
        for f in files:
            index = picks[f][round_no]
            uri = f.as_uri()
            blank = _blank(texts[f], index)
            s.open(uri, blank)
            label = "first_in_file" if round_no == 0 else "back_in_file"
            typed = await _type_line(s, uri, texts[f], index, label, args.pace_ms, think_ms=args.think_ms)
            firsts.append(
                {
                    "file": f.name,
                    "line": index,
                    "kind": label,
                    "ms": typed[0]["ms"],
                    "how": typed[0]["how"],
                    **_until_shown(typed),
                }
            )
            keys += typed
            s.close(uri)
            print(
                f"{f.name}:{index + 1} {label} {typed[0]['ms']} ms, then {len(typed) - 1} keystrokes",
                file=sys.stderr,
            )
    main_phase = _summary(keys)
    args.out.parent.mkdir(parents=True, exist_ok=True)  # a checkpoint, in case the rest is cut short
    args.out.write_text(
        json.dumps({"partial": True, "typing": main_phase, "first_request": firsts}, indent=2)
    )
    # Replay seen lines again (mostly answered without the model) until N keystrokes, then RSS.
    total = len(keys)
    while total < args.rss_keystrokes:
        for f in files:
            for index in picks[f]:
                uri = f.as_uri()
                s.open(uri, _blank(texts[f], index))
                total += len(await _type_line(s, uri, texts[f], index, "typed", 0))
                s.close(uri)
                if total >= args.rss_keystrokes:
                    break
            if total >= args.rss_keystrokes:
                break
    server_rss = _rss_mb(s.pid)
    status = await s.status()
    await s.stop()

    # Restart on the same cache directory: the same first request, then a new line in a seen file.
    s = Session(model, home, root, options)
    await s.start()
    restart: list[dict[str, Any]] = []
    f = files[0]
    uri = f.as_uri()
    index = picks[f][0]
    s.open(uri, _blank(texts[f], index))
    same = await _type_line(s, uri, texts[f], index, "restart_same_request", 0, limit=args.restart_keystrokes)
    restart.append({"kind": "same_request", "ms": same[0]["ms"], "how": same[0]["how"]})
    # The first keystroke that had been answered by the model before the restart comes from disk.
    cached = [k for k in same if k["how"] == "cached"]
    if cached:
        restart.append({"kind": "first_cached", "ms": cached[0]["ms"], "how": "cached"})
    s.close(uri)
    fresh = next(i for i in _pick_lines(random.Random(args.seed + 1), texts[f], 5) if i not in picks[f])
    s.open(uri, _blank(texts[f], fresh))
    new = await _type_line(s, uri, texts[f], fresh, "restart_new_line", 0, limit=0, think_ms=args.think_ms)
    restart.append({"kind": "new_line_in_seen_file", "ms": new[0]["ms"], "how": new[0]["how"]})
    s.close(uri)
    # Going on where you left off: the two lines with code after the last one typed in the last file
    # (not files[0], whose lines the requests above just moved). The first is usually answered from
    # the completion cache (the prefetch after that line made it); the second needs the model.
    f = files[-1]
    uri = f.as_uri()
    for kind, going_on in zip(
        ("next_line_where_left_off", "second_line_where_left_off"),
        _next_lines(texts[f], picks[f][-1], 3)[1:],
        strict=False,
    ):
        s.open(uri, _blank(texts[f], going_on))
        on = await _type_line(s, uri, texts[f], going_on, kind, 0, limit=0, think_ms=args.think_ms)
        restart.append({"kind": kind, "ms": on[0]["ms"], "how": on[0]["how"]})
        s.close(uri)
    restart_status = await s.status()
    await s.stop()

    engine_rss = _engine_alone_rss(model, 4096)
    return {
        "bench": "typing",
        "date": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "load_average_at_start": load_at_start,
        "model": args.model,
        "source": args.pypi,
        "files": [str(f.relative_to(root)) for f in files],
        "settings": {
            **options,
            "pace_ms": args.pace_ms,
            "think_ms": args.think_ms,
            "back_to": args.back_to,
            "rss_keystrokes": args.rss_keystrokes,
        },
        "server_load_s": round(load_s, 1),
        "typing": main_phase,
        "first_request": firsts,
        "first_request_ms": {
            "first_in_file": [x["ms"] for x in firsts if x["kind"] == "first_in_file"],
            "back_in_file": [x["ms"] for x in firsts if x["kind"] == "back_in_file"],
        },
        "restart": restart,
        "restart_then_typing": _summary(same + new),
        "memory": {
            "keystrokes_replayed": total,
            "server_rss_mb": server_rss,
            "engine_alone_rss_mb": engine_rss,
            "ratio": round(server_rss / engine_rss, 3),
        },
        "disk": {p.name: _dir_mb(p) for p in sorted(home.iterdir()) if p.is_dir()},
        "server_status": {"requests": status["requests"], "cache": status.get("cache")},
        "restart_status": {"requests": restart_status["requests"]},
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--pypi", default="requests==2.32.3", help="the sdist whose files are typed")
    parser.add_argument("--files", type=int, default=3)
    parser.add_argument("--lines-per-file", type=int, default=2)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--pace-ms", type=int, default=0, help="0: wait for each suggestion")
    parser.add_argument(
        "--think-ms",
        type=int,
        default=1000,
        help="pause after the cursor arrives at a new line (didFocus sent) before typing; 0: neither",
    )
    parser.add_argument(
        "--back-to",
        choices=("random", "next"),
        default="random",
        help="later lines of a file: random ones, or the line after the one typed there before",
    )
    parser.add_argument("--rss-keystrokes", type=int, default=2000)
    parser.add_argument("--restart-keystrokes", type=int, default=20)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path("bench/results/typing.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
