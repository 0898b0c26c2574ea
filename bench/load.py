"""Load held: typing at 50 keystrokes a second for a minute over LSP (every keystroke cancels the
request before it), then 16 HTTP clients at once for a minute, some hanging up mid-stream, on one
``fimble serve`` (stdio LSP + HTTP, the model of ``--model``).

Reports what was answered, cancelled and refused (429 with Retry-After), latency percentiles of the
answered requests, and the server's RSS, threads and open file descriptors at the start, after each
phase and at the end. Writes JSON (default ``bench/results/load.json``). Run under the CPU lock:
``flock /tmp/team/cpu.lock python bench/load.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.reliability.load import LoadServer, http_clients, resources, summary, typing_session  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--rate", type=float, default=50.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/load.json")
    args = parser.parse_args()
    from fimble.models import store

    model = str(store.resolve(args.model))
    with tempfile.TemporaryDirectory(prefix="fimble-load-") as tmp_dir:
        tmp = Path(tmp_dir)
        root = tmp / "ws"
        root.mkdir()
        (root / "config.py").write_text("DEFAULTS = {'retries': 3, 'timeout': 10}\n")
        env = {**os.environ, "FIMBLE_HOME": str(tmp / "home")}
        env.pop("FIMBLE_KV_STATE_DIR", None)
        with open(tmp / "server.log", "wb") as log:
            server = LoadServer(model, root, tmp / "home", env, log)
            marks = {"start": resources(server.pid)}
            typing = typing_session(server, args.rate, args.seconds)
            time.sleep(2)
            marks["after_typing"] = resources(server.pid)
            http = http_clients(server.url, args.clients, args.seconds)
            time.sleep(2)
            marks["end"] = resources(server.pid)
            code = server.close()
    machine = {"cpus": os.cpu_count(), "python": platform.python_version(), "system": platform.platform()}
    result = {
        "machine": machine,
        "model": args.model,
        "typing": typing,
        "http": {
            "clients": args.clients,
            "seconds": args.seconds,
            "ok": http.ok,
            "refused_429": http.refused_429,
            "refused_without_retry_after": http.refused_without_retry_after,
            "disconnected_mid_stream": http.disconnected_mid_stream,
            "other": http.other,
            "latency": summary(http.latencies),
        },
        "resources": {name: dataclasses.asdict(value) for name, value in marks.items()},
        "exit_code": code,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
