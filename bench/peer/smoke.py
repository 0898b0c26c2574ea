"""Smoke check of the peer: start llama-server, ask one llama.vim-style infill, print JSON.

Proves the whole peer path works before an evaluation leans on it: the built binary runs on this CPU,
loads the GGUF, answers ``/infill`` with ``input_extra``, and reports its timings. The snippet's
cursor sits on ``return`` inside ``distance``; the other-file chunk defines ``Point``. The same request
is sent twice: the second shows the KV cache at work (``cache_n`` up, ``prompt_n`` down).

    .venv/bin/python bench/peer/smoke.py [--model qwen2.5-coder-0.5b] [--binary PATH]

Exits 1 when the completion is empty.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

try:
    from bench.peer import llama_vim
except ImportError:  # run as a script: this folder is on sys.path
    import llama_vim  # type: ignore[no-redef]

GEOMETRY = [
    "from dataclasses import dataclass",
    "",
    "",
    "@dataclass(frozen=True)",
    "class Point:",
    "    x: float",
    "    y: float",
]

SNIPPET = '''import math

from geometry import Point


def distance(a: Point, b: Point) -> float:
    """Euclidean distance between two points."""
    dx = a.x - b.x
    dy = a.y - b.y
    return <CURSOR>


def midpoint(a: Point, b: Point) -> Point:
    return Point((a.x + b.x) / 2, (a.y + b.y) / 2)
'''


def run(model: str, binary: str | None, threads: int | None) -> dict[str, Any]:
    """Start the peer, send the request twice, and gather what a reader needs to judge it."""
    offset = SNIPPET.index("<CURSOR>")
    text = SNIPPET.replace("<CURSOR>", "")
    window = llama_vim.local_window(text, offset)
    extra = [llama_vim.chunk_from_lines("geometry.py", GEOMETRY)]
    indent = llama_vim.n_indent(text, offset)
    with llama_vim.PeerServer(model, binary=binary, threads=threads) as server:
        version = subprocess.run(
            [str(server.binary), "--version"], capture_output=True, text=True, check=False
        ).stderr.strip()
        props = server.props()
        first = server.infill(window, input_extra=extra, indent=indent)
        again = server.infill(window, input_extra=extra, indent=indent)
        return {
            "binary": str(server.binary),
            "version": version,
            "model": str(server.model),
            "command": server.command,
            "n_ctx": props.get("default_generation_settings", {}).get("n_ctx"),
            "request": llama_vim.build_request(
                window.input_prefix,
                window.input_suffix,
                prompt=window.prompt,
                input_extra=extra,
                indent=indent,
            ),
            "result": first.to_json(),
            "result_cached": again.to_json(),
            "same_text": first.text == again.text,
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="model name or .gguf path")
    parser.add_argument("--binary", default=None, help="llama-server (default: where build.sh puts it)")
    parser.add_argument("--threads", type=int, default=None, help="default: physical cores")
    args = parser.parse_args(argv)
    report = run(args.model, args.binary, args.threads)
    print(json.dumps(report, indent=2))
    return 0 if report["result"]["text"].strip() else 1


if __name__ == "__main__":
    sys.exit(main())
