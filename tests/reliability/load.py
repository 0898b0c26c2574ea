"""Load on one real ``fimble serve`` (LSP on stdio and HTTP): typing at a fixed rate with every
keystroke superseding the last, and concurrent HTTP clients, some hanging up mid-stream.

``bench/load.py`` runs it for a minute and writes the figures; ``tests/reliability/test_load.py``
runs a few seconds and asserts only correctness (every request answered or cleanly refused, and no
thread or file-descriptor growth past a stated bound).
"""

from __future__ import annotations

import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.reliability.lsp_fuzz import StdioClient

__all__ = ["LoadServer", "Resources", "http_clients", "resources", "typing_session"]

SOURCE = '''import json
from pathlib import Path


def load_config(path: Path) -> dict:
    """Read the configuration file and fill in the defaults."""
    with open(path) as handle:
        data = json.load(handle)
    data.setdefault("name", path.stem)
    data.setdefault("retries", 3)
    return data


def save_config(path: Path, data: dict) -> None:
    text = json.dumps(data, indent=2)
    path.write_text(text)
'''


@dataclass(frozen=True)
class Resources:
    rss_mib: float
    threads: int
    fds: int


def resources(pid: int) -> Resources:
    status = Path(f"/proc/{pid}/status").read_text()
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    return Resources(
        rss_mib=round(int(fields["VmRSS"].split()[0]) / 1024, 1),
        threads=int(fields["Threads"]),
        fds=len(os.listdir(f"/proc/{pid}/fd")),
    )


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def summary(latencies: list[float]) -> dict[str, float | int | None]:
    return {"n": len(latencies), "p50_ms": _percentile(latencies, 0.5), "p90_ms": _percentile(latencies, 0.9),
            "p99_ms": _percentile(latencies, 0.99), "max_ms": _percentile(latencies, 1.0)}  # fmt: skip


class LoadServer:
    """``fimble serve`` with LSP on stdio and HTTP on a free loopback port, model loaded."""

    def __init__(self, model: str, root: Path, home: Path, env: dict[str, str], log: Any) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.root = root
        self.client = StdioClient(["-m", model, "--http", f"127.0.0.1:{self.port}"], env, log)
        options = {"maxTokens": 16, "deadlineMs": 4000, "invokedDeadlineMs": 60_000}
        answer = self.client.request("initialize", {
            "processId": os.getpid(), "rootUri": root.as_uri(),
            "workspaceFolders": [{"uri": root.as_uri(), "name": "ws"}],
            "capabilities": {"textDocument": {"inlineCompletion": {}}}, "initializationOptions": options,
        })  # fmt: skip
        assert "result" in answer, answer
        self.client.notify("initialized", {})
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline:
            status = self.client.request("workspace/executeCommand", {"command": "fimble.status"})["result"]
            if status["model"]["state"] != "loading":
                break
            time.sleep(0.2)
        self.url = f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.client.proc.pid

    def close(self) -> int:
        return self.client.close()


def typing_session(server: LoadServer, rate: float, seconds: float, name: str = "typed.py") -> dict[str, Any]:
    """Type ``SOURCE`` (again and again) at ``rate`` keystrokes a second for ``seconds``: each
    keystroke is a didChange and an automatic inline request, and cancels the request before it,
    as editors do. Every request must be answered: a result, or the cancelled error."""
    client = server.client
    uri = (server.root / name).as_uri()
    client.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": 1,
                                                            "text": ""}})  # fmt: skip
    line = col = 0
    version = 1
    previous: tuple[int, Any, float] | None = None
    outstanding: list[tuple[Any, float]] = []
    latencies: list[float] = []
    outcomes = {"answered": 0, "with_text": 0, "cancelled": 0, "errors": 0}
    started = time.monotonic()
    keystrokes = 0
    while time.monotonic() - started < seconds:
        char = SOURCE[keystrokes % len(SOURCE)]
        version += 1
        here = {"line": line, "character": col}
        client.notify("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"range": {"start": here, "end": here}, "text": char}]})  # fmt: skip
        line, col = (line + 1, 0) if char == "\n" else (line, col + 1)
        if previous is not None:
            client.notify("$/cancelRequest", {"id": previous[0]})
        msg_id, answer = client.request_async("textDocument/inlineCompletion", {
            "textDocument": {"uri": uri}, "position": {"line": line, "character": col},
            "context": {"triggerKind": 2}})  # fmt: skip
        sent = time.monotonic()
        previous = (msg_id, answer, sent)
        outstanding.append((answer, sent))
        keystrokes += 1
        time.sleep(max(0.0, started + keystrokes / rate - time.monotonic()))
    for answer, sent in outstanding:
        message = client.wait("textDocument/inlineCompletion", answer)
        outcomes["answered"] += 1
        if "error" in message:
            outcomes["cancelled" if message["error"].get("code") == -32800 else "errors"] += 1
        else:
            latencies.append((message["_received"] - sent) * 1000)
            items = (message.get("result") or {}).get("items") or []
            outcomes["with_text"] += bool(items)
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    return {"keystrokes": keystrokes, "rate_per_s": round(keystrokes / seconds, 1), **outcomes,
            "latency": summary(latencies)}  # fmt: skip


@dataclass
class HttpOutcome:
    ok: int = 0
    refused_429: int = 0
    refused_without_retry_after: int = 0
    disconnected_mid_stream: int = 0
    other: dict[str, int] = field(default_factory=dict)
    latencies: list[float] = field(default_factory=list)


def http_clients(url: str, clients: int, seconds: float, seed: int = 7) -> HttpOutcome:
    """``clients`` threads send FIM requests (a third streamed) for ``seconds``; one stream in four
    is dropped after its first chunk. Every request must end in 200 or 429 with Retry-After."""
    outcome = HttpOutcome()
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def one(rng: random.Random, http: httpx.Client, n: int) -> None:
        prefix = f"def handler_{n}(request):\n    data = request.json()\n    return "
        stream = rng.random() < 1 / 3
        body = {"prompt": prefix, "suffix": "\n", "max_tokens": 12, "stream": stream}
        t0 = time.monotonic()
        if stream:
            with http.stream("POST", "/v1/completions", json=body) as response:
                status = response.status_code
                if status == 200 and rng.random() < 0.25:
                    next(response.iter_raw(), None)  # the first chunk, then hang up
                    with lock:
                        outcome.disconnected_mid_stream += 1
                    return
                response.read()
                headers = response.headers
        else:
            response = http.post("/v1/completions", json=body)
            status, headers = response.status_code, response.headers
        with lock:
            if status == 200:
                outcome.ok += 1
                outcome.latencies.append((time.monotonic() - t0) * 1000)
            elif status == 429:
                outcome.refused_429 += 1
                if "retry-after" not in headers:
                    outcome.refused_without_retry_after += 1
            else:
                outcome.other[str(status)] = outcome.other.get(str(status), 0) + 1

    def run(index: int) -> None:
        rng = random.Random(seed * 1000 + index)
        with httpx.Client(base_url=url, timeout=300) as http:
            n = 0
            while time.monotonic() < stop:
                try:
                    one(rng, http, index * 100_000 + n)
                except httpx.HTTPError as err:
                    with lock:
                        outcome.other[type(err).__name__] = outcome.other.get(type(err).__name__, 0) + 1
                n += 1
                if outcome.refused_429:
                    time.sleep(rng.uniform(0.05, 0.3))  # a polite client waits a little before retrying

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 600)
    return outcome
