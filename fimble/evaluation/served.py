"""The served evaluation: ask a real ``fimble serve`` at each case's position, as an editor would.

The in-process evaluation (``runner.run_model``) answers every line from its full prompt with no
deadline, which no user gets: a cold place is answered from a first prompt with a share of the
full one's budgets, a request has a deadline, caches and warm-up decide what is ready. Here a real server
process runs over stdio (``sys.executable -m fimble serve``), driven by pygls's ``LanguageClient``,
on a temporary copy of the repository (the user's files and the sdist cache are never written) with
a fresh ``FIMBLE_HOME`` per session, so no earlier run's index, KV states or completion cache help.

Per position: the masked file is written to disk in the copy (the server's watcher gives it to the
index, so retrieval cannot find the hidden line) and sent as the buffer (``didOpen``, then a full
``didChange``); after ``settle_ms`` for the watcher, ``textDocument/didFocus`` says where the cursor
went (as fimble's editor plugins do), the client waits the think time, then asks an Automatic
``textDocument/inlineCompletion`` and an Invoked one at the same place. Each answer's latency is
measured from request to response; ``fimble.status`` after each says how the server answered. The
file is restored (disk and buffer) after its sample. This package never imports ``fimble.server``.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble.errors import InputError
from fimble.evaluation.cases import Case
from fimble.evaluation.metrics import first_line, score
from fimble.evaluation.served_client import ServedError, Session, small_count, utf16_column

__all__ = [
    "REQUESTS",
    "ServedError",
    "ServedSettings",
    "copy_workspace",
    "initialization_options",
    "parse_server_option",
    "run_served",
    "served_row",
]

REQUESTS = ("automatic", "invoked")
_COPY_SKIP = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "node_modules",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)

Row = dict[str, Any]


@dataclass(frozen=True)
class ServedSettings:
    """How the served evaluation runs: think times (each in a fresh server), extra server settings
    (``initializationOptions``, camelCase as ``fimble/server/settings.py`` names them), and the wait
    after a file is written for the server's watcher to pass it to the index."""

    think_ms: tuple[int, ...] = (0, 2000)
    server_options: Mapping[str, Any] = field(default_factory=dict)
    settle_ms: int = 600  # the watcher's 0.3 s debounce plus the index update
    ready_timeout_s: float = 1200.0


def parse_server_option(text: str) -> tuple[str, Any]:
    """``key=value`` -> (key, value); a dotted key (``index.exclude``) names a nested setting, and
    the value is read as JSON when it is JSON (``4000``, ``true``, ``["a"]``), else kept as text.
    The server checks the names and values (a bad one: one message, then its default)."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key or any(not part for part in key.split(".")):
        raise InputError(f"--server-option wants KEY=VALUE (e.g. deadlineMs=8000), got {text!r}")
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        value = raw
    return key, value


def initialization_options(
    max_tokens: int, server_options: Mapping[str, Any], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """What the client sends as ``initializationOptions``: the eval's token limit, then ``extra``
    (budgets the user set), then ``--server-option`` values (nested by their dotted keys). The
    deadlines and ``firstSuggestionMs`` stay the server's defaults unless given."""
    out: dict[str, Any] = {"maxTokens": max_tokens, **(extra or {})}
    for key, value in server_options.items():
        path = key.split(".")
        node = out
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return out


def copy_workspace(root: Path, parent: Path) -> Path:
    """A copy of ``root`` under ``parent`` with the same folder name (the prompt shows it), without
    version control, dependency and cache folders; symlinks stay links."""
    dest = parent / root.name
    shutil.copytree(root, dest, symlinks=True, ignore=lambda _d, names: [n for n in names if n in _COPY_SKIP])
    return dest


def _slim(last: Mapping[str, Any]) -> dict[str, Any]:
    """The parts of ``fimble.status``'s ``last`` timeline a report needs. Engine numbers are kept
    only when this request produced a result (otherwise the server repeats the previous one's)."""
    fresh = "explain" in last
    engine = (last.get("engine") or {}) if fresh else {}
    explain = last.get("explain") or {}
    parts = explain.get("parts") or []
    return {
        "outcome": last.get("outcome"),
        "trigger": last.get("trigger"),
        "stop_reason": engine.get("stop_reason"),
        "prompt_tokens": engine.get("prompt_tokens"),
        "tokens_evaluated": engine.get("tokens_evaluated"),
        "tokens_reused": engine.get("tokens_reused"),
        "tokens_generated": engine.get("tokens_generated"),
        "prompt_ms": engine.get("prompt_ms"),
        "generation_ms": engine.get("generation_ms"),
        "context_ms": last.get("context_ms"),
        "context_files": last.get("context_files"),
        "context_tokens": sum(p.get("tokens", 0) for p in parts if p.get("kind") == "context")
        if fresh
        else None,
        "chunks": [
            {"path": p.get("path", ""), "reason": p.get("reason", ""), "tokens": p.get("tokens", 0)}
            for p in parts
            if p.get("kind") == "context"
        ],
        "shape": explain.get("shape"),
        "deadline_hit": bool(last.get("deadline_hit")),
        "early_lines": bool(last.get("early_lines")),  # a block's first lines, past firstSuggestionMs
        "total_ms": last.get("total_ms"),
    }


def served_row(
    case: Case,
    *,
    model: str,
    think_ms: int,
    request: str,
    visit: str,
    text: str,
    latency_ms: float,
    last: Mapping[str, Any],
    small_before: int | None,
    small_after: int | None,
    error: str | None = None,
) -> Row:
    """One answer, scored against the case's truth on its first line. ``small_first_prompt``: the
    server's small-first-prompt counter grew between ``small_before`` and ``small_after`` (it does
    not say which job read it: ``fimble.status`` does not mark an answer as from a small prompt)."""
    prediction = first_line(text)
    sc = score(prediction, case.truth)
    small = None if small_before is None or small_after is None else small_after > small_before
    return {
        "mode": "served",
        "model": model,
        "think_ms": think_ms,
        "request": request,
        "case": case.id,
        "sample": case.sample,
        "path": case.path,
        "line": case.line,
        "column": case.column,
        "position": case.position,
        "visit": visit,
        "ceiling_position": case.ceiling,
        "cross_file": bool(case.cross_file),
        "cross_file_names": list(case.cross_file),
        "cross_file_unseen": list(case.cross_file_unseen),
        "truth": case.truth,
        "prediction": prediction,
        "empty": not text.strip(),
        "exact": sc.exact,
        "edit_similarity": sc.edit_similarity,
        "identifier_exact": sc.identifier_exact,
        "identifier_f1": sc.identifier_f1,
        "latency_ms": round(latency_ms, 1),
        "small_first_prompt": small,
        "small_first_prompts": [small_before, small_after],
        "server": _slim(last),
        **({"error": error} if error else {}),
    }


async def _position(
    s: Session, case: Case, visit: str, uri: str, disk: Path, think_ms: int, settle_ms: int, model: str
) -> list[Row]:
    """Mask, focus, think, then the automatic and the invoked request at ``case``'s cursor."""
    disk.write_text(case.text, encoding="utf-8")
    s.show(case, case.text, uri)
    await asyncio.sleep(settle_ms / 1000)
    line_text = case.text.split("\n")[case.line]
    character = utf16_column(line_text, case.column)
    before = small_count(await s.status())  # (a focus may already start a small first prompt)
    s.focus(uri, case.line, character)
    await asyncio.sleep(think_ms / 1000)
    rows: list[Row] = []
    for request in REQUESTS:
        text, ms, error = await s.ask(uri, case.line, character, invoked=request == "invoked")
        status = await s.status()
        after = small_count(status)
        rows.append(
            served_row(
                case,
                model=model,
                think_ms=think_ms,
                request=request,
                visit=visit,
                text=text,
                latency_ms=ms,
                last=status.get("last") or {},
                small_before=before,
                small_after=after,
                error=error,
            )
        )
        before = after
    return rows


async def _session(
    root: Path,
    cases: Sequence[Case],
    revisits: Sequence[Case],
    *,
    model: str,
    model_path: str,
    think_ms: int,
    threads: int,
    options: dict[str, Any],
    settings: ServedSettings,
    log_path: Path,
    on_row: Callable[[Row], None],
    progress: Callable[[int], None] | None,
) -> dict[str, Any]:
    """One fresh server (its own FIMBLE_HOME and copy of ``root``) asked at every case, sample by
    sample, and then at the revisits; the scratch folder is removed and the server ended after,
    also on errors and Ctrl-C. Returns what the run's record says about the server."""
    scratch = Path(tempfile.mkdtemp(prefix="fimble-eval-served-"))
    started = time.monotonic()
    info: dict[str, Any] = {"model": model, "think_ms": think_ms, "log": str(log_path)}
    s: Session | None = None
    try:
        home = scratch / "home"
        home.mkdir()
        workspace = copy_workspace(root, scratch / "workspace")
        s = Session(model_path, home, workspace, threads, options)
        await s.start(log_path)
        try:
            ready = await s.wait_ready(settings.ready_timeout_s)
        except ServedError as err:
            raise ServedError(f"{err}\n{s.log_tail()}") from None
        info["ready_s"] = round(time.monotonic() - started, 1)
        info["index"] = ready.get("index", {}).get("indexes")
        info["cpu_path"] = (ready.get("model") or {}).get("cpu_path")
        originals: dict[str, bytes] = {}

        async def visit(group: Sequence[Case], label: str | None) -> None:
            path = group[0].path
            disk = workspace / path
            uri = disk.as_uri()
            if path not in originals:
                originals[path] = disk.read_bytes()
            original = originals[path]
            try:
                for case in group:
                    for row in await _position(
                        s, case, label or case.visit, uri, disk, think_ms, settings.settle_ms, model
                    ):
                        on_row(row)
                    if progress:
                        progress(1)
            finally:  # the file as it was, on disk and in the buffer, before the next sample
                disk.write_bytes(original)
                s.show(group[0], original.decode("utf-8").replace("\r\n", "\n"), uri)

        for _sample, group in itertools.groupby(cases, key=lambda c: (c.path, c.sample)):
            await visit(list(group), None)
        for case in revisits:
            await visit([case], "revisited")
        final = await s.status()
        info["requests"] = final.get("requests")
        info["cache"] = final.get("cache")
        info["small_first_prompts"] = small_count(final)
    finally:
        if s is not None:
            await s.stop()
        info["seconds"] = round(time.monotonic() - started, 1)
        shutil.rmtree(scratch, ignore_errors=True)
    return info


def run_served(
    root: Path,
    cases: Sequence[Case],
    revisits: Sequence[Case],
    *,
    models: Sequence[str],
    settings: ServedSettings,
    max_tokens: int,
    threads: int,
    out: Path,
    extra_options: Mapping[str, Any] | None = None,
    on_row: Callable[[Row], None],
    progress: Callable[[int], None] | None = None,
    on_run: Callable[[dict[str, Any]], None] | None = None,
) -> None:
    """Every model × think time in its own fresh server on its own copy of ``root``, asking at
    ``cases`` (session order) and then at ``revisits``. Rows go to ``on_row`` as they come, each
    session's summary (readiness, request counters, the server's log file, or the ``error`` that
    ended it) to ``on_run``."""
    from fimble.models import store

    options = initialization_options(max_tokens, settings.server_options, extra_options)
    for model in models:
        model_path = str(store.resolve(model))  # the server's FIMBLE_HOME is fresh: give it the file
        for think in settings.think_ms:
            log_path = out / f"server-{Path(model_path).stem}-think{think}.log"
            log_path.unlink(missing_ok=True)
            try:
                info = asyncio.run(
                    _session(
                        root,
                        cases,
                        revisits,
                        model=model,
                        model_path=model_path,
                        think_ms=think,
                        threads=threads,
                        options=options,
                        settings=settings,
                        log_path=log_path,
                        on_row=on_row,
                        progress=progress,
                    )
                )
            except ServedError as err:  # this server failed: say so, and go on with the next one
                info = {"model": model, "think_ms": think, "log": str(log_path), "error": str(err)}
            if on_run:
                on_run(info)
