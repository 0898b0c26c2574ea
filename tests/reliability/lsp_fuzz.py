"""Hypothesis-generated LSP sessions against the real ``fimble serve`` over stdio.

A session is a list of steps: documents opened, changed (ranges past the end, inside a surrogate
pair, reversed), closed and asked about (closed or never opened ones too); requests cancelled at
once; huge lines, binary-looking and lone-surrogate text; workspace folders that do not exist;
settings of the wrong type or out of range; messages whose JSON is broken; methods nobody serves.
``StdioClient`` is a small synchronous JSON-RPC client: it can send what typed clients refuse to
build, answers the server's own requests, and times every request out (a hang is a failure).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

__all__ = ["Counts", "StdioClient", "run_session", "sessions"]

TIMEOUT_S = float(os.environ.get("FIMBLE_FUZZ_TIMEOUT_S", "240"))


class Hang(AssertionError):
    """A request got no answer in ``TIMEOUT_S``."""


@dataclass
class Counts:
    sessions: int = 0
    messages: int = 0
    requests: int = 0
    errors_answered: int = 0  # JSON-RPC error responses (bad params, unknown document...)
    by_kind: dict[str, int] = field(default_factory=dict)


class StdioClient:
    def __init__(self, args: list[str], env: dict[str, str], stderr: Any) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fimble", "serve", *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=env,
        )
        self._next = 0
        self._waiting: dict[Any, queue.Queue[dict[str, Any]]] = {}
        self._lock = threading.Lock()
        self.notifications: list[dict[str, Any]] = []
        self.counts = Counts()
        threading.Thread(target=self._read, daemon=True).start()

    # -- wire ------------------------------------------------------------------------------------

    def _write(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.proc.stdin.flush()
        self.counts.messages += 1

    def send(self, message: dict[str, Any]) -> None:
        self._write(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def send_raw(self, body: bytes) -> None:
        self._write(body)

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = None
            while True:
                line = out.readline()
                if not line:
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii", "replace").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            message = json.loads(out.read(length or 0))
            if "method" in message and "id" in message:  # the server asks: answer so it never waits
                result: Any = [None] * len(message.get("params", {}).get("items", [])) or None
                self.send({"id": message["id"], "result": result})
            elif "method" in message:
                self.notifications.append(message)
            else:
                with self._lock:
                    waiter = self._waiting.pop(message.get("id"), None)
                if waiter is not None:
                    message["_received"] = time.monotonic()  # (for latencies)
                    waiter.put(message)

    # -- requests --------------------------------------------------------------------------------

    def request_async(self, method: str, params: Any) -> tuple[int, queue.Queue[dict[str, Any]]]:
        with self._lock:
            self._next += 1
            msg_id = self._next
            answer: queue.Queue[dict[str, Any]] = queue.Queue()
            self._waiting[msg_id] = answer
        self.send({"id": msg_id, "method": method, "params": params})
        self.counts.requests += 1
        return msg_id, answer

    def wait(self, method: str, answer: queue.Queue[dict[str, Any]]) -> dict[str, Any]:
        try:
            message = answer.get(timeout=TIMEOUT_S)
        except queue.Empty:
            raise Hang(f"no answer to {method} in {TIMEOUT_S:.0f} s (server alive: {self.alive})") from None
        if "error" in message:
            self.counts.errors_answered += 1
        return message

    def request(self, method: str, params: Any) -> dict[str, Any]:
        return self.wait(method, self.request_async(method, params)[1])

    def notify(self, method: str, params: Any) -> None:
        self.send({"method": method, "params": params})

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> int:
        try:
            if self.alive:
                self.request("shutdown", None)
                self.notify("exit", None)
            return self.proc.wait(60)
        finally:
            if self.alive:
                self.proc.kill()


# -- strategies ----------------------------------------------------------------------------------

_CODE = st.sampled_from(
    ["def f(x):\n    return ", "import os\n", "class A:\n    pass\n", "x = [1, 2,\n", "    \n", "π = 3.14\n",
     "s = '😀😀'\n", "\t\tif a:\n", "}\n", "// c\n", "SELECT 1;\n"]
)  # fmt: skip
_ODD = st.sampled_from(
    ["\x00\x01\x02\xff", "\ud800", "a\udfffb", "😀", "\r\n", "\r", "\u2028", "\ufeff", "x" * 20_000,
     "y" * 120_000, "\u0301" * 50]
)  # fmt: skip
TEXT = st.lists(st.one_of(_CODE, _ODD, st.text(max_size=40)), max_size=12).map("".join)
POSITION = st.fixed_dictionaries(
    {"line": st.one_of(st.integers(0, 12), st.integers(0, 2**31 - 1)),
     "character": st.one_of(st.integers(0, 40), st.integers(0, 2**31 - 1))}
)  # fmt: skip
RANGE = st.fixed_dictionaries({"start": POSITION, "end": POSITION})
_SETTING_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.text(max_size=12),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=6), st.booleans(), max_size=3),
)  # fmt: skip
_SETTING_KEYS = st.sampled_from(
    ["maxTokens", "multiline", "contextTokens", "enable", "languages", "debounceMs", "deadlineMs",
     "prefixTokens", "suffixTokens", "index", "completionFallback", "firstSuggestionMs", "kvStateMb",
     "invokedDeadlineMs",
     "speculative", "model", "noSuchSetting"]
)  # fmt: skip

DOCS = st.integers(0, 3)  # document slots; slot 3 is never opened
LANGUAGES = st.sampled_from(["python", "javascript", "plaintext", "", "rust"])
CHANGES = st.lists(st.tuples(st.one_of(st.none(), RANGE), TEXT), min_size=1, max_size=4)
SETTINGS = st.dictionaries(_SETTING_KEYS, _SETTING_VALUES, max_size=3)
GARBAGE = st.sampled_from(
    [b"{", b"[]", b"null", b'{"jsonrpc": "2.0", "id": 1}',
     b'{"jsonrpc":"2.0","method":"textDocument/didOpen"}', b"\xff\xfe",
     b'{"jsonrpc":"2.0","id":"x","method":"fimble.nope"}']
)  # fmt: skip
STEP = st.one_of(
    st.tuples(st.just("open"), DOCS, TEXT, LANGUAGES),
    st.tuples(st.just("change"), DOCS, CHANGES),
    st.tuples(st.just("close"), DOCS),
    st.tuples(st.just("inline"), DOCS, POSITION, st.booleans(), st.booleans()),  # invoked?, cancel at once?
    st.tuples(st.just("completion"), DOCS, POSITION, st.booleans()),
    st.tuples(st.just("focus"), DOCS, POSITION),
    st.tuples(st.just("settings"), SETTINGS, st.booleans()),
    st.tuples(st.just("folders"), st.booleans()),
    st.tuples(st.just("garbage"), GARBAGE),
    st.tuples(st.just("unknown"), st.text(max_size=20)),
    st.tuples(st.just("status"),),
)  # fmt: skip
sessions = st.lists(STEP, min_size=1, max_size=14)


def _uri(root: Path, slot: int) -> str:
    return (root / f"doc{slot}.py").as_uri()


def run_session(client: StdioClient, root: Path, steps: list[tuple[Any, ...]]) -> None:
    """Play ``steps``; every request must be answered (a result or an error), never hang."""
    versions: dict[int, int] = {}
    pending: list[tuple[str, queue.Queue[dict[str, Any]]]] = []
    for step in steps:
        kind = step[0]
        client.counts.by_kind[kind] = client.counts.by_kind.get(kind, 0) + 1
        if kind == "open":
            _, slot, text, language = step
            versions[slot] = 1
            client.notify("textDocument/didOpen", {"textDocument": {
                "uri": _uri(root, slot), "languageId": language, "version": 1, "text": text}})  # fmt: skip
        elif kind == "change":
            _, slot, changes = step
            versions[slot] = versions.get(slot, 0) + 1
            content = [{"text": t} if r is None else {"range": r, "text": t} for r, t in changes]
            client.notify("textDocument/didChange", {
                "textDocument": {"uri": _uri(root, slot), "version": versions[slot]},
                "contentChanges": content})  # fmt: skip
        elif kind == "close":
            versions.pop(step[1], None)
            client.notify("textDocument/didClose", {"textDocument": {"uri": _uri(root, step[1])}})
        elif kind == "inline":
            _, slot, position, invoked, cancel = step
            method = "textDocument/inlineCompletion"
            msg_id, answer = client.request_async(method, {
                "textDocument": {"uri": _uri(root, slot)}, "position": position,
                "context": {"triggerKind": 1 if invoked else 2}})  # fmt: skip
            if cancel:
                client.notify("$/cancelRequest", {"id": msg_id})
            pending.append((method, answer))
        elif kind == "completion":
            _, slot, position, invoked = step
            method = "textDocument/completion"
            _, answer = client.request_async(method, {
                "textDocument": {"uri": _uri(root, slot)}, "position": position,
                "context": {"triggerKind": 1 if invoked else 2}})  # fmt: skip
            pending.append((method, answer))
        elif kind == "focus":
            params = {"textDocument": {"uri": _uri(root, step[1])}, "position": step[2]}
            client.notify("textDocument/didFocus", params)
        elif kind == "settings":
            _, values, nested = step
            settings = {"fimble": values} if nested else values
            client.notify("workspace/didChangeConfiguration", {"settings": settings})
        elif kind == "folders":
            folder = root if step[1] else root / "does" / "not" / "exist"
            event = {"added": [{"uri": folder.as_uri(), "name": "f"}], "removed": []}
            if not step[1]:
                event = {"added": event["added"], "removed": [{"uri": root.as_uri(), "name": "r"}]}
            client.notify("workspace/didChangeWorkspaceFolders", {"event": event})
        elif kind == "garbage":
            client.send_raw(step[1])
        elif kind == "unknown":
            pending.append(("unknown", client.request_async(f"fimble/{step[1]}", {})[1]))
        elif kind == "status":
            status = client.request_async("workspace/executeCommand", {"command": "fimble.status"})
            pending.append(("status", status[1]))
        if len(pending) > 6:  # keep a bounded number in flight, as an editor does
            method, answer = pending.pop(0)
            client.wait(method, answer)
    for method, answer in pending:
        client.wait(method, answer)
    for slot in list(versions):  # leave no document behind for the next session
        client.notify("textDocument/didClose", {"textDocument": {"uri": _uri(root, slot)}})
