"""A list of prompts over HTTP against the same prompts one request at a time, and keystrokes meanwhile.

One real ``fimble serve --no-lsp --http`` (fresh ``FIMBLE_HOME``, the model of ``--model``) and a
real HTTP client:

1. **one at a time**: each of ``--n`` short FIM requests cut from a real repository (``bench/batch.py``'s
   ``requests``: a few lines above a mid-line cursor, a few below) as its own ``/v1/completions``
   request, one after the other;
2. **as a list**: the same prompts in one ``/v1/completions`` request (``prompt`` a list), which the
   server decodes side by side in one batch job (``Completer.submit_batch``);
3. **independent clients**: ``--clients`` HTTP clients at once, each sending its share of the same
   prompts one request after another (a team sharing one server): the server decodes the requests
   that overlap side by side (``fimble.completion.side_by_side``);
4. **keystrokes**: ``--keys`` requests that type a line one character each, first with the server
   idle, then the same keys while a second list request runs, each phase after a request elsewhere
   (its first keystroke cold in both); their latencies side by side with the server's timings
   (the batch job is stopped for each and runs again with what had finished kept).

Reports requests/s of 1, 2 and 3 (their ratios to 1 are the batch's gains on this CPU), how many
answers differ from 1's (greedy; batch shapes may part at near-ties), and keystroke latency
percentiles idle and during the list. Writes JSON (default ``bench/results/http_batch.json``).
Run on a quiet machine: ``chrt -r 1 .venv/bin/python bench/http_batch.py --n 32``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.batch import requests  # noqa: E402
from tests.reliability.load import summary  # noqa: E402

TYPED = "def parse_header(line):\n    name, _, value = line.partition(':')\n    return "
OTHER = "import os\n\n\ndef home():\n    return os.path."
KEYSTROKES = "name.strip().lower(), value.strip()"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fim(prefix: str, suffix: str) -> str:
    return f"<|fim_prefix|>{prefix}<|fim_suffix|>{suffix}<|fim_middle|>"


def _texts(response: httpx.Response) -> list[str]:
    if response.status_code != 200:
        raise SystemExit(f"{response.status_code} from the server: {response.text}")
    return [c["text"] for c in response.json()["choices"]]


def _keystrokes(http: httpx.Client, keys: int, running: Any = None) -> list[dict[str, Any]]:
    """Type the first ``keys`` characters of ``KEYSTROKES``, one ``/completion`` request each, after
    a request at an unrelated place (so the first keystroke finds nothing of its prompt in the KV
    cache, idle or not); each with its wall time, the server's timings and whether the list
    request was still running when it was sent."""
    http.post("/completion", json={"prompt": _fim(OTHER, "\n"), "n_predict": 1}).raise_for_status()
    out = []
    for k in range(1, keys + 1):
        body = {"prompt": _fim(TYPED + KEYSTROKES[:k], "\n"), "n_predict": 16}
        during = running is not None and not running.done()
        t0 = time.perf_counter()
        response = http.post("/completion", json=body)
        response.raise_for_status()
        timings = response.json()["timings"]
        out.append(
            {
                "ms": (time.perf_counter() - t0) * 1000,
                "during_list": during,
                "prompt_n": timings["prompt_n"],
                "prompt_ms": timings["prompt_ms"],
                "predicted_n": timings["predicted_n"],
                "predicted_ms": timings["predicted_ms"],
            }
        )
        time.sleep(0.3)  # a typist's pause: the batch job resumes between keystrokes
    return out


def _keys_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Wall-time percentiles, and the server's own: prompt tokens evaluated and the time outside
    evaluation and generation (queueing, waiting for the batch to stop, HTTP)."""
    return {
        **summary([r["ms"] for r in rows]),
        "prompt_n": [r["prompt_n"] for r in rows],
        "predicted_n": [r["predicted_n"] for r in rows],
        "other_ms": summary([r["ms"] - r["prompt_ms"] - r["predicted_ms"] for r in rows]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--repo", type=Path, default=ROOT / "fimble")
    parser.add_argument("--n", type=int, default=32, help="requests (at most 64: one list request)")
    parser.add_argument("--lines", type=int, default=6, help="prefix lines above the cursor")
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--clients", type=int, default=4, help="independent clients at once (0: skip)")
    parser.add_argument("--keys", type=int, default=8, help="keystrokes idle and during the list")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench/results/http_batch.json")
    args = parser.parse_args()
    from fimble.models import store

    model = str(store.resolve(args.model))
    items = [json.loads(x) for x in requests(args.repo, args.n, args.lines, args.seed, args.max_tokens)]
    prompts = [_fim(x["prefix"], x["suffix"]) for x in items]
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="fimble-http-batch-") as home:
        env = {**os.environ, "FIMBLE_HOME": home}
        log = Path(home) / "server.log"
        command = [sys.executable, "-m", "fimble", "serve", "--no-lsp", "--http", f"127.0.0.1:{port}"]
        with log.open("w") as err:
            server = subprocess.Popen([*command, "-m", model], env=env, stdout=subprocess.DEVNULL, stderr=err)
        try:
            result = _run(f"http://127.0.0.1:{port}", prompts, args)
        finally:
            server.terminate()
            server.wait(60)
    result["meta"] = {
        "model": args.model,
        "repo": str(args.repo.relative_to(ROOT) if args.repo.is_relative_to(ROOT) else args.repo),
        "n": args.n,
        "lines": args.lines,
        "max_tokens": args.max_tokens,
        "clients": args.clients,
        "seed": args.seed,
        "machine": {"cpu": platform.processor() or platform.machine(), "logical_cpus": os.cpu_count()},
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "answers"}, indent=1))


def _side_by_side(http: httpx.Client) -> int:
    """The server's count of generations decoded side by side with other clients' (``/metrics``)."""
    for line in http.get("/metrics").text.splitlines():
        if line.startswith("fimble_side_by_side_generations_total "):
            return int(line.split()[1])
    return 0


def _clients(url: str, prompts: list[str], body: dict[str, Any], n: int) -> tuple[float, list[str]]:
    """``n`` clients at once, client ``i`` sending prompts ``i, i + n, ...`` one after another;
    the wall time and every answer in prompt order."""

    def client(share: range) -> list[tuple[int, str]]:
        with httpx.Client(base_url=url, timeout=3600) as http:
            return [
                (j, _texts(http.post("/v1/completions", json={**body, "prompt": prompts[j]}))[0])
                for j in share
            ]

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        got = dict(
            x for part in pool.map(client, [range(i, len(prompts), n) for i in range(n)]) for x in part
        )
    return time.perf_counter() - t0, [got[j] for j in range(len(prompts))]


def _run(url: str, prompts: list[str], args: argparse.Namespace) -> dict[str, Any]:
    with httpx.Client(base_url=url, timeout=3600) as http, httpx.Client(base_url=url, timeout=600) as keys:
        for _ in range(600):  # the model loads in the background
            try:
                if http.get("/health").json().get("status") == "ok":
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        body = {"max_tokens": args.max_tokens, "stop": ["\n"]}
        t0 = time.perf_counter()
        alone = [_texts(http.post("/v1/completions", json={**body, "prompt": p}))[0] for p in prompts]
        one_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        listed = _texts(http.post("/v1/completions", json={**body, "prompt": prompts}))
        list_s = time.perf_counter() - t0
        before = _side_by_side(http)
        clients = _clients(url, prompts, body, args.clients) if args.clients > 1 else None
        together = _side_by_side(http) - before
        idle = _keystrokes(keys, args.keys)
        with ThreadPoolExecutor(1) as pool:
            t0 = time.perf_counter()
            running = pool.submit(http.post, "/v1/completions", json={**body, "prompt": prompts})
            time.sleep(2.0)  # the list's first prompts are being read
            during = _keystrokes(keys, args.keys, running)
            again = _texts(running.result())
            busy_s = time.perf_counter() - t0
    n = len(prompts)
    return {
        "one_at_a_time": {"seconds": round(one_s, 2), "requests_per_s": round(n / one_s, 3)},
        "as_a_list": {"seconds": round(list_s, 2), "requests_per_s": round(n / list_s, 3)},
        "gain": round(one_s / list_s, 2),
        "answers_differing": sum(a != b for a, b in zip(alone, listed, strict=True)),
        "independent_clients": None
        if clients is None
        else {
            "clients": args.clients,
            "seconds": round(clients[0], 2),
            "requests_per_s": round(n / clients[0], 3),
            "gain": round(one_s / clients[0], 2),
            "answers_differing": sum(a != b for a, b in zip(alone, clients[1], strict=True)),
            "decoded_side_by_side": together,
        },
        "list_with_keystrokes": {
            "seconds": round(busy_s, 2),
            "answers_differing_from_the_first_list": sum(a != b for a, b in zip(listed, again, strict=True)),
        },
        "keystroke_ms": {
            "idle": _keys_summary(idle),
            "during_list": _keys_summary([k for k in during if k["during_list"]]),
            "sent_during_list": sum(k["during_list"] for k in during),
        },
        "answers": {"alone": alone, "as_a_list": listed, "clients": clients[1] if clients else None},
    }


if __name__ == "__main__":
    main()
