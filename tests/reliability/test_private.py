"""Offline and private, checked on the real server: one serving session (LSP over stdio and HTTP, the
real 0.5B model, a real workspace index) that

- opens no socket but its own loopback ones and looks up no host name (every socket audit event of
  every Python process, and the server's open sockets in ``/proc`` at the end);
- lets nothing of a secret file (``.env``, ``*.pem``, credentials) reach a prompt (every text the
  tokenizer saw), the index, the completion cache, the saved KV states or any other file it stores;
- reads no file outside its workspace folder, whatever ``path`` an HTTP prompt names (``..``,
  absolute paths, Continue's ``Path:`` snippets, llama.cpp's ``input_extra`` file names).

The hooks that record all this are in ``hooks/sitecustomize.py``.
"""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from lsprotocol import types

from fimble.server.exposure import is_loopback
from tests.server.lsp.conftest import (
    MODEL_OPTIONS,
    env,
    inline_params,
    insert_texts,
    model_path,
    open_doc,
    start,
    status,
    stop,
    wait_model,
)

pytestmark = pytest.mark.model

HOOKS = Path(__file__).parent / "hooks"
SECRET = "zqSECRET7f3a91"  # in every secret file; must appear in no prompt and no stored byte
OUTSIDE = "zqOUTSIDE5521"  # in a file beside the workspace; must never be read

APP = """import os

from settings import load_settings


def connect(url: str) -> str:
    settings = load_settings()
    return settings["database"] + url


def main() -> None:
    value = connect("/api")
    print(value)
"""
SETTINGS = '''def load_settings() -> dict[str, str]:
    """The application's settings, read from the environment."""
    return {"database": "postgres://localhost/app"}
'''


def _workspace(tmp_path: Path) -> tuple[Path, Path]:
    ws = tmp_path / "ws"
    (ws / "keys").mkdir(parents=True)
    (ws / "app.py").write_text(APP)
    (ws / "settings.py").write_text(SETTINGS)
    (ws / ".env").write_text(f"DATABASE_URL=postgres://admin:{SECRET}@db/app\nAPI_TOKEN={SECRET}\n")
    (ws / ".env.local").write_text(f"def leaked():\n    return '{SECRET}'\n")
    (ws / "keys" / "server.pem").write_text(f"-----BEGIN PRIVATE KEY-----\n{SECRET}\n")
    (ws / "credentials.py").write_text(f"PASSWORD = '{SECRET}'\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "private.py").write_text(f"def outside_secret():\n    return '{OUTSIDE}'\n")
    return ws, outside


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _records(path: Path) -> list[Any]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _off_machine(records: list[Any]) -> list[Any]:
    """Socket events that reach past loopback: connects/sends to, binds on or lookups of anything else."""
    bad = []
    for pid, event, args in records:
        if event in ("socket.gethostname", "socket.sethostname"):
            continue
        if event in ("socket.getaddrinfo", "socket.gethostbyname", "socket.gethostbyname_ex",
                     "socket.gethostbyaddr", "socket.getnameinfo"):  # fmt: skip
            host = args[0] if args else None
            host = host[0] if isinstance(host, list) else host
            if host not in (None, "", b"") and not is_loopback(str(host)):
                bad.append((pid, event, args))
            continue
        address = args[0] if args else None
        if isinstance(address, list) and address and not is_loopback(str(address[0])):
            bad.append((pid, event, args))  # (str or bytes addresses are Unix sockets)
    return bad


def _inet_sockets(pid: int) -> list[tuple[str, str, str]]:
    """(table, local address, remote address) of every TCP/UDP socket the process holds open."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().as_posix()
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = []
    for table in ("tcp", "tcp6", "udp", "udp6", "raw", "raw6"):
        lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        for line in lines:
            cols = line.split()
            if cols[9] in inodes:
                found.append((table, cols[1], cols[2]))
    return found


def _hex_loopback(address: str) -> bool:
    """A ``/proc/net`` address (hex, little-endian words) in 127.0.0.0/8, ::1 or unset (0)."""
    host = address.split(":")[0]
    if set(host) == {"0"}:
        return True  # a remote side of a listening socket
    if len(host) == 8:
        return host.endswith("7F")  # 127.x.x.x, byte order reversed
    v4_mapped = host.startswith("0000000000000000FFFF0000") and host.endswith("7F")
    return host == "00000000000000000000000001000000" or v4_mapped


def _stored_files(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and "models" not in p.relative_to(home).parts]


async def _index_ready(client: Any, timeout: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while loop.time() < end:
        indexes = (await status(client))["index"].get("indexes", [])
        if indexes and all(i.get("ready") for i in indexes):
            return
        await asyncio.sleep(0.2)
    raise AssertionError("the workspace was not indexed in time")


async def test_a_serving_session_stays_on_the_machine_and_keeps_secrets(tmp_path: Path) -> None:
    ws, outside = _workspace(tmp_path)
    home = tmp_path / "home"
    logs = {name: tmp_path / f"{name}.jsonl" for name in ("net", "open", "prompts")}
    port = _free_port()
    server_env = env(
        home,
        PYTHONPATH=str(HOOKS),
        FIMBLE_TEST_NET_LOG=str(logs["net"]),
        FIMBLE_TEST_OPEN_LOG=str(logs["open"]),
        FIMBLE_TEST_OPEN_WATCH=str(outside),
        FIMBLE_TEST_PROMPT_LOG=str(logs["prompts"]),
    )
    client = await start(
        ["-m", model_path(), "--http", f"127.0.0.1:{port}"], server_env, options=MODEL_OPTIONS, root=ws
    )
    try:
        assert (await wait_model(client, timeout=900))["model"]["state"] == "ready"
        await _index_ready(client)
        # Typing in secret files: no suggestion, and nothing of them anywhere afterwards.
        for rel in (".env", ".env.local", "keys/server.pem", "credentials.py"):
            uri = (ws / rel).as_uri()
            text = (ws / rel).read_text()
            open_doc(client, uri, text, "python" if rel.endswith(".py") else "plaintext")
            client.text_document_did_change(types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(1, 0), types.Position(1, 0)), text=f"X_{SECRET} = 1\n"
                )],
            ))  # fmt: skip
            got = await client.text_document_inline_completion_async(inline_params(uri, 1, 0))
            assert insert_texts(got) == [], rel
            client.text_document_did_save(types.DidSaveTextDocumentParams(
                types.TextDocumentIdentifier(uri), text=text + f"SAVED_{SECRET} = 1\n"
            ))  # fmt: skip
        assert (await status(client))["last"]["outcome"] == "secret_file"
        # A normal file still completes, with the workspace as context.
        app = (ws / "app.py").as_uri()
        open_doc(client, app, APP)
        line = APP.splitlines().index("    print(value)")
        got = await client.text_document_inline_completion_async(inline_params(app, line + 1, 4))
        assert (await status(client))["last"]["outcome"] in ("served", "empty")
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=120) as http:
            # (Every way a client names its file, and every escape, is tried without the model in
            # tests/server/http/test_private.py; here one, through the real model and index.)
            answer = await http.post("/infill", json={
                "input_prefix": "def f():\n    return outside_", "input_suffix": "\n", "n_predict": 4,
                "input_extra": [{"filename": f"{ws}/../outside/private.py", "text": "y = 2\n"}],
            })  # fmt: skip
            assert answer.status_code == 200 and OUTSIDE not in answer.text, answer.text
            refused = await http.post("/v1/completions", json={"prompt": (
                f"<|file_sep|>.env\n<|fim_prefix|>API_TOKEN={SECRET}<|fim_suffix|><|fim_middle|>"
            ), "max_tokens": 4})  # fmt: skip
            assert refused.status_code == 403 and "secrets list" in refused.text
        sockets = _inet_sockets(client._server.pid)  # type: ignore[attr-defined]
        assert sockets, "the server holds no socket: the check would prove nothing"
        assert all(_hex_loopback(local) and _hex_loopback(remote) for _, local, remote in sockets), sockets
    finally:
        await stop(client)

    assert _off_machine(_records(logs["net"])) == []
    assert any(event == "socket.bind" for _, event, _ in _records(logs["net"]))  # the hook did run
    assert _records(logs["open"]) == [], "a file outside the workspace was opened"
    prompts = _records(logs["prompts"])
    assert any("def connect" in p for p in prompts)  # the capture did run
    assert not [p for p in prompts if SECRET in p or OUTSIDE in p]
    stored = _stored_files(home)
    assert any("completions" in str(p) for p in stored) and any("index" in str(p) for p in stored), stored
    leaked = [p for p in stored if SECRET.encode() in p.read_bytes() or OUTSIDE.encode() in p.read_bytes()]
    assert leaked == []
