"""The peer: llama.cpp's own ``llama-server``, asked for completions the way llama.vim asks.

fimble is compared, on the same lines and the same GGUF, against the setup llama.cpp's authors ship
for editor FIM: ``llama-server`` started with the flags llama.vim's README recommends, and one
``POST /infill`` per completion carrying llama.vim's local window and its ring of ``input_extra``
chunks. This module reproduces the client side from llama.vim's ``autoload/llama.vim``
(``s:fim_ctx_local`` builds the window, ``llama#fim`` the request) and the server side from the vendored
``tools/server`` of the pinned llama-cpp-python, so both sides run the very same llama.cpp.

Two deliberate departures, both for evaluation: sampling is greedy (``top_k`` 1: llama.vim's sampler
chain ``top_k, top_p, infill`` has no temperature stage, so only ``top_k`` 1 makes it deterministic),
and the seed is fixed. Everything else is sent as llama.vim sends it.

It imports nothing from fimble but ``fimble.models.store.resolve`` (for model names), so it measures
the peer, not fimble.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple

__all__ = [
    "DEFAULT_N_PREFIX",
    "DEFAULT_N_SUFFIX",
    "Chunk",
    "InfillOptions",
    "InfillResult",
    "LocalWindow",
    "PeerError",
    "PeerServer",
    "build_request",
    "chunk_from_lines",
    "default_binary",
    "infill",
    "local_window",
    "n_indent",
    "render",
]

# llama.vim's g:llama_config defaults: lines of the buffer before / after the cursor line.
DEFAULT_N_PREFIX = 256
DEFAULT_N_SUFFIX = 64

# What llama.vim asks the server to return (it reads the timings to show them inline), plus three
# fields this benchmark records; the server only filters its answer by this list.
_RESPONSE_FIELDS = (
    "content",
    "timings/prompt_n",
    "timings/prompt_ms",
    "timings/prompt_per_token_ms",
    "timings/prompt_per_second",
    "timings/predicted_n",
    "timings/predicted_ms",
    "timings/predicted_per_token_ms",
    "timings/predicted_per_second",
    "truncated",
    "tokens_cached",
    "timings/cache_n",
    "tokens_evaluated",
    "stop_type",
)

_ROOT = Path(__file__).resolve().parents[2]
_BLANK = re.compile(r"[ \t]*")  # Vim's \s is space or tab


class PeerError(RuntimeError):
    """The peer server could not be found, started or asked; the message says what to do."""


@dataclass(frozen=True)
class Chunk:
    """One ``input_extra`` entry: text from another place, which the server puts before the FIM prefix."""

    filename: str
    text: str

    def to_json(self) -> dict[str, str]:
        return {"filename": self.filename, "text": self.text}


def chunk_from_lines(filename: str, lines: Sequence[str]) -> Chunk:
    """A chunk as llama.vim's ring buffer stores one: its lines joined, with a final newline."""
    return Chunk(filename, "\n".join(lines) + "\n")


class LocalWindow(NamedTuple):
    """llama.vim's split of the text around the cursor, in the fields ``/infill`` takes them."""

    input_prefix: str  # the lines above the cursor line, each ending in "\n"
    prompt: str  # the cursor line up to the cursor ("" on a blank line)
    input_suffix: str  # the rest of the cursor line, "\n", the lines below, "\n"


def _cursor_lines(text: str, offset: int) -> tuple[list[str], int, int]:
    """Vim's view of ``text``: its lines, and the cursor's line index and column (in characters).

    A file's final newline ends its last line rather than opening an empty one, as in a Vim buffer;
    only a cursor placed after it sits on that empty line.
    """
    if not 0 <= offset <= len(text):
        raise ValueError(f"offset {offset} is outside the text (length {len(text)})")
    lines = text.split("\n")
    y = text.count("\n", 0, offset)
    x = offset - (text.rfind("\n", 0, offset) + 1)
    if len(lines) > 1 and lines[-1] == "" and y < len(lines) - 1:
        lines.pop()
    return lines, y, x


def local_window(
    text: str, offset: int, n_prefix: int = DEFAULT_N_PREFIX, n_suffix: int = DEFAULT_N_SUFFIX
) -> LocalWindow:
    """The local context llama.vim sends for a cursor at character ``offset`` of ``text``.

    As ``s:fim_ctx_local`` builds it for a fresh request: ``n_prefix`` lines before the cursor line
    and ``n_suffix`` after, the cursor line split at the cursor; on a line of only whitespace, both
    halves of that line are dropped so the model writes the line from column 0 (llama.vim then trims
    the suggestion's indentation to what the line already has). Vim counts columns in bytes; here
    they are characters, which splits the line at the same place.
    """
    lines, y, x = _cursor_lines(text, offset)
    line = lines[y]
    before, after = line[:x], line[x:]
    if _BLANK.fullmatch(line):
        before = after = ""
    above = lines[max(0, y - n_prefix) : y]
    below = lines[y + 1 : y + 1 + n_suffix]
    return LocalWindow(
        input_prefix="\n".join(above) + "\n",
        prompt=before,
        input_suffix=after + "\n" + "\n".join(below) + "\n",
    )


def n_indent(text: str, offset: int) -> int:
    """llama.vim's ``n_indent``: the cursor line's leading whitespace (0 on a blank line).

    The server stops at the first generated line indented less than this, so a completion inside a
    block does not run on past it.
    """
    lines, y, _x = _cursor_lines(text, offset)
    line = lines[y]
    if _BLANK.fullmatch(line):
        return 0
    match = _BLANK.match(line)
    return match.end() if match else 0


def render(content: str, text: str, offset: int) -> list[str]:
    """What llama.vim shows for the server's ``content`` at character ``offset`` of ``text``: its lines,
    the first one inserted at the cursor; ``[""]`` when it shows nothing.

    As ``s:fim_render`` does: trailing empty lines are dropped; on a line of only whitespace (where the
    request left out the line, so the model writes it from column 0), as much leading whitespace as
    the line already has is taken off the first line; a suggestion that is empty, repeats the rest of
    the line, restates the next non-blank line, or has an empty first line followed by the lines
    below, is discarded; one of only whitespace is not accepted. An evaluation scores this, not the
    raw text: it is what a llama.vim user gets.
    """
    lines, y, x = _cursor_lines(text, offset)

    def get(i: int) -> str:  # Vim's getline(n): "" past the end (getline(a, b) stops at the end)
        return lines[i] if 0 <= i < len(lines) else ""

    shown = content.split("\n")
    while shown and shown[-1] == "":
        shown.pop()
    if not shown:
        return [""]
    line_cur = lines[y]
    if _BLANK.fullmatch(line_cur):
        lead = min(len(shown[0]) - len(shown[0].lstrip(" \t")), len(line_cur))
        line_cur, shown[0] = shown[0][:lead], shown[0][lead:]
    prefix, suffix = line_cur[:x], line_cur[x:]
    if len(shown) > 1 and shown[0] == "" and shown[1:] == lines[y + 1 : y + len(shown)]:
        return [""]
    if len(shown) == 1 and shown[0] == suffix:
        return [""]
    cmp_y = y + 1
    while cmp_y < len(lines) - 1 and _BLANK.fullmatch(get(cmp_y)):
        cmp_y += 1
    if prefix + shown[0] == get(cmp_y):
        below = get(cmp_y + 1)
        if len(shown) == 1:
            return [""]
        if len(shown) == 2 and shown[1] == (below[: len(shown[1])] if shown[1] else below):
            return [""]
        if len(shown) > 2 and shown[1:] == lines[cmp_y + 1 : cmp_y + len(shown)]:
            return [""]
    if len(shown) == 1 and _BLANK.fullmatch(shown[0] + suffix):
        return [""]
    return shown


@dataclass(frozen=True)
class InfillOptions:
    """Request settings; the defaults are llama.vim's, except greedy sampling and a fixed seed."""

    n_predict: int = 128
    stop: tuple[str, ...] = ()
    t_max_prompt_ms: int = 500  # sent as llama.vim sends it; this server does not implement it
    t_max_predict_ms: int = 250  # llama.vim's first request at a position (1000 for its follow-ups)
    top_k: int = 40
    top_p: float = 0.90
    samplers: tuple[str, ...] = ("top_k", "top_p", "infill")
    greedy: bool = True  # top_k 1 and temperature 0: the same text for the same prompt
    seed: int = 0
    id_slot: int = 0  # llama.vim pins slot 0, so every request meets the same KV cache
    timeout_s: float = 120.0

    def sampling(self) -> dict[str, Any]:
        if self.greedy:
            return {"top_k": 1, "top_p": self.top_p, "temperature": 0.0, "samplers": list(self.samplers)}
        return {"top_k": self.top_k, "top_p": self.top_p, "samplers": list(self.samplers)}


def build_request(
    input_prefix: str,
    input_suffix: str,
    *,
    prompt: str = "",
    input_extra: Sequence[Chunk | Mapping[str, str]] = (),
    indent: int = 0,
    options: InfillOptions | None = None,
) -> dict[str, Any]:
    """The JSON body of one llama.vim ``/infill`` request (pure, so it can be checked and recorded)."""
    opts = options or InfillOptions()
    extra = [
        c.to_json() if isinstance(c, Chunk) else {"filename": c["filename"], "text": c["text"]}
        for c in input_extra
    ]
    return {
        "id_slot": opts.id_slot,
        "input_prefix": input_prefix,
        "input_suffix": input_suffix,
        "input_extra": extra,
        "prompt": prompt,
        "n_predict": opts.n_predict,
        "stop": list(opts.stop),
        "n_indent": indent,
        **opts.sampling(),
        "seed": opts.seed,
        "stream": False,
        "cache_prompt": True,
        "t_max_prompt_ms": opts.t_max_prompt_ms,
        "t_max_predict_ms": opts.t_max_predict_ms,
        "response_fields": list(_RESPONSE_FIELDS),
    }


@dataclass(frozen=True)
class InfillResult:
    """One answer: the text, the server's own timings, and what the client waited in all."""

    text: str
    prompt_n: int  # prompt tokens evaluated for this request (the rest came from the KV cache)
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    cache_n: int  # prompt tokens reused from the cache
    tokens_cached: int
    truncated: bool
    stop_type: str
    latency_ms: float  # wall clock around the HTTP round trip, as the editor would wait
    raw: dict[str, Any] = field(repr=False)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "raw"}


def _post(url: str, body: Mapping[str, Any], timeout_s: float) -> dict[str, Any]:
    data = json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:
            return json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise PeerError(f"{url} answered {exc.code}: {detail}") from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise PeerError(f"{url} did not answer ({exc}): is the peer server running?") from exc


def infill(
    base_url: str,
    input_prefix: str,
    input_suffix: str,
    *,
    prompt: str = "",
    input_extra: Sequence[Chunk | Mapping[str, str]] = (),
    indent: int = 0,
    options: InfillOptions | None = None,
) -> InfillResult:
    """Send one llama.vim-style request to ``base_url``'s ``/infill`` and time it.

    A new connection per request, as llama.vim's one ``curl`` per request makes.
    """
    opts = options or InfillOptions()
    body = build_request(
        input_prefix, input_suffix, prompt=prompt, input_extra=input_extra, indent=indent, options=opts
    )
    start = time.perf_counter()
    raw = _post(base_url.rstrip("/") + "/infill", body, opts.timeout_s)
    latency_ms = (time.perf_counter() - start) * 1000.0
    return InfillResult(
        text=str(raw.get("content", "")),
        prompt_n=int(raw.get("timings/prompt_n", 0)),
        prompt_ms=float(raw.get("timings/prompt_ms", 0.0)),
        predicted_n=int(raw.get("timings/predicted_n", 0)),
        predicted_ms=float(raw.get("timings/predicted_ms", 0.0)),
        cache_n=int(raw.get("timings/cache_n", 0)),
        tokens_cached=int(raw.get("tokens_cached", 0)),
        truncated=bool(raw.get("truncated", False)),
        stop_type=str(raw.get("stop_type", "")),
        latency_ms=round(latency_ms, 3),
        raw=raw,
    )


def _pin() -> str:
    """``llama-cpp-python==X`` as pinned in pyproject.toml, read the way build.sh and the Makefile read it."""
    text = (_ROOT / "pyproject.toml").read_text()
    match = re.search(r'^\s*"(llama-cpp-python==[^"]*)"', text, re.MULTILINE)
    if not match:
        raise PeerError(f"no llama-cpp-python==X pin in {_ROOT / 'pyproject.toml'}")
    return match.group(1)


def default_binary() -> Path:
    """Where ``bench/peer/build.sh`` installs the server for the pinned llama.cpp."""
    peer_dir = Path(os.environ.get("PEER_DIR") or Path.home() / ".cache" / "fimble" / "peer")
    return peer_dir / _pin() / "llama-server"


def _physical_cores() -> int:
    try:
        import psutil

        return max(1, psutil.cpu_count(logical=False) or os.cpu_count() or 1)
    except ImportError:
        return max(1, os.cpu_count() or 1)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _model_path(model: str | os.PathLike[str]) -> Path:
    if Path(model).suffix == ".gguf" and Path(model).expanduser().is_file():
        return Path(model).expanduser().resolve()
    from fimble.models.store import resolve  # only for names; a path needs no fimble

    return resolve(model)


def _fimble_repacks(model: Path) -> bool:
    """Whether fimble loads ``model`` here with its extra buffer types (its CPU path is ``full``);
    True without fimble to ask."""
    try:
        from fimble.models.cpu_path import CpuPath, verdict_for
    except ImportError:
        return True
    return verdict_for(model).path is CpuPath.FULL


class PeerServer:
    """``llama-server`` on one GGUF with llama.vim's recommended FIM flags, for a ``with`` block.

    llama.vim's README: ``--port 8012 -ngl 99 -fa -ub 1024 -b 1024 -dt 0.1 --ctx-size 0
    --cache-reuse 256`` (the same values as the vendored server's ``--fim-qwen-*-default``). Here:
    ``-ngl`` is dropped (a CPU build), ``-dt`` too (deprecated and ignored by this server), ``-fa`` takes
    its explicit form ``on``, the port is a free one on 127.0.0.1, and ``-t`` sets the threads for
    generation and prompt alike. ``-b``/``-ub`` matter beyond speed: ``/infill`` keeps at most 3/4 of
    ``-b`` tokens of prefix and 1/4 of suffix; the context left after ``-b`` and the answer holds
    ``input_extra``.

    ``repack``: None follows the CPU path fimble's probe chose for this model here
    (``fimble.models.cpu_path``): anything but ``full`` adds ``--no-repack``, which leaves out every
    extra buffer type, AMX's included. Both systems then run the same kernels, and the peer runs at
    all where ggml's AMX kernels fault (an Intel VM that lists AMX: the server died of SIGSEGV while
    loading, and fimble runs ``plain`` there).
    """

    def __init__(
        self,
        model: str | os.PathLike[str],
        *,
        binary: str | os.PathLike[str] | None = None,
        port: int | None = None,
        ctx: int = 0,  # 0 = the model's trained context, as llama.vim recommends
        threads: int | None = None,
        batch: int = 1024,
        ubatch: int = 1024,
        cache_reuse: int = 256,
        flash_attn: str = "on",
        extra_args: Sequence[str] = (),
        log_path: str | os.PathLike[str] | None = None,
        startup_timeout_s: float = 180.0,
        repack: bool | None = None,
    ) -> None:
        self.binary = Path(binary) if binary else default_binary()
        if not (self.binary.is_file() and os.access(self.binary, os.X_OK)):
            raise PeerError(f"no llama-server at {self.binary}: build it with `bash bench/peer/build.sh`")
        self.model = _model_path(model)
        self.port = port or _free_port()
        self.threads = threads or _physical_cores()
        self.repack = _fimble_repacks(self.model) if repack is None else repack
        self.args = [
            "-m", str(self.model),
            "--host", "127.0.0.1",
            "--port", str(self.port),
            "--ctx-size", str(ctx),
            "--threads", str(self.threads),
            "--batch-size", str(batch),
            "--ubatch-size", str(ubatch),
            "--cache-reuse", str(cache_reuse),
            "--flash-attn", flash_attn,
            *([] if self.repack else ["--no-repack"]),
            *extra_args,
        ]  # fmt: skip
        self.log_path = Path(log_path) if log_path else None
        self.startup_timeout_s = startup_timeout_s
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Any = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def command(self) -> list[str]:
        return [str(self.binary), *self.args]

    def _log_tail(self, n: int = 20) -> str:
        if self._log is None:
            return ""
        self._log.flush()
        with open(self._log.name, errors="replace") as f:
            return "".join(f.readlines()[-n:])

    def start(self) -> PeerServer:
        """Start the server and wait until ``/health`` says ok (it answers 503 while loading)."""
        if self.log_path:
            self._log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        else:
            self._log = tempfile.NamedTemporaryFile(prefix="llama-server-", suffix=".log", delete=False)  # noqa: SIM115
        self._proc = subprocess.Popen(
            self.command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self._proc.poll()
            if code is not None:
                tail = self._log_tail()
                self.stop()
                raise PeerError(f"llama-server exited with {code} while starting:\n{tail}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as resp:
                    if json.loads(resp.read()).get("status") == "ok":
                        return self
            except (urllib.error.URLError, TimeoutError, ConnectionError, json.JSONDecodeError):
                pass
            time.sleep(0.2)
        tail = self._log_tail()
        self.stop()
        raise PeerError(f"llama-server was not healthy after {self.startup_timeout_s:.0f} s:\n{tail}")

    def stop(self) -> None:
        """Ask the server to exit (SIGTERM: it finishes cleanly), then insist after 15 s."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self._log is not None:
            self._log.close()
            if not self.log_path:
                os.unlink(self._log.name)
            self._log = None

    def props(self) -> dict[str, Any]:
        """The server's ``/props`` (context size, build, default generation settings), for the record."""
        with urllib.request.urlopen(self.url + "/props", timeout=10) as resp:
            return json.loads(resp.read())

    def infill(self, window: LocalWindow, **kwargs: Any) -> InfillResult:
        """``infill`` against this server for one local window."""
        return infill(self.url, window.input_prefix, window.input_suffix, prompt=window.prompt, **kwargs)

    def __enter__(self) -> PeerServer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
