"""workspace/executeCommand: fimble.status, fimble.reindex, fimble.toggle, fimble.accept."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from fimble.completion import warmup
from fimble.errors import FimbleError
from fimble.server.lsp.progress import WorkDone

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["register", "status"]

log = logging.getLogger(__name__)


def _model_status(ls: FimbleServer) -> dict[str, Any]:
    completer = ls.ctx.completer
    engine = completer.worker.engine if completer.ready else None
    out: dict[str, Any] = {
        "name": completer.model or "default",
        "state": "ready" if completer.ready else ("error" if completer.load_error else "loading"),
        "threads": completer.threads or "auto",
    }
    if completer.load_error is not None:
        out["error"] = str(completer.load_error)
    if engine is not None:
        out.update(
            path=str(engine.model_path),
            fim_family=engine.fim.family,
            load_ms=round(engine.load_ms, 1),
            n_ctx=engine.n_ctx,
            tokens_shifted=engine.tokens_shifted,
        )
        if (cpu := getattr(engine, "cpu", None)) is not None:  # a remote backend has none
            out["cpu_path"] = {"path": str(cpu.path), "summary": cpu.summary()}
        out.update(warmup.describe(engine, completer.worker.warmer))
    return out


def status(ls: FimbleServer) -> dict[str, Any]:
    """Everything a user asks when suggestions are slow or missing, as one JSON object."""
    stats = asdict(ls.ctx.completer.stats())
    prompt_tokens = stats["tokens_evaluated"] + stats["tokens_reused"]
    return {
        "enabled": ls.enabled,
        "model": _model_status(ls),
        "index": ls.ctx.index.stats(),
        "requests": stats,
        "cache": {
            # Share of prompt tokens whose KV was reused instead of evaluated: the keystroke cache.
            "kv_hit_rate": round(stats["tokens_reused"] / prompt_tokens, 4) if prompt_tokens else 0.0,
            # Finished suggestions answered again without the model (memory LRU + LMDB on disk).
            "completions": asdict(ls.ctx.completer.cache.stats()),
        },
        "acceptance": ls.ctx.acceptance.counts(),
        "last": ls.suggester.last,
        "documents": len(ls.documents),
        "roots": [str(r) for r in ls.roots],
        "position_encoding": ls.encoding.value,
        "settings": {**asdict(ls.settings), "languages": dict(ls.settings.languages)},
    }


def register(server: FimbleServer) -> None:
    # Handlers take only ``*args: Any``: pygls passes the server to a first parameter named ``ls`` or
    # annotated with a superclass of the server (``object`` included), and arguments follow.
    @server.command("fimble.status")
    def fimble_status(*args: Any) -> dict[str, Any]:
        return status(server)

    @server.command("fimble.toggle")
    def fimble_toggle(*args: Any) -> dict[str, Any]:
        """Flip automatic suggestions (or set them with a true/false argument)."""
        server.enabled = args[0] if args and isinstance(args[0], bool) else not server.enabled
        message = f"fimble: automatic suggestions {'on' if server.enabled else 'off'}"
        server.window_show_message(types.ShowMessageParams(type=types.MessageType.Info, message=message))
        return {"enabled": server.enabled}

    @server.command("fimble.reindex")
    async def fimble_reindex(*args: Any) -> dict[str, Any]:
        progress = WorkDone(server, "fimble: indexing")
        await progress.begin("starting")
        loop = asyncio.get_running_loop()

        def report(done: int, total: int, message: str) -> None:
            pct = int(done * 100 / total) if total else None
            loop.call_soon_threadsafe(progress.report, message, pct)

        try:
            result = await server.ctx.index.reindex(report)
        except FimbleError as err:
            progress.end("failed")
            server.tell(f"fimble: reindex failed: {err}", types.MessageType.Error, once=False)
            return {"error": str(err)}
        progress.end("done")
        return {"index": result}

    @server.command("fimble.accept")
    def fimble_accept(*args: Any) -> None:
        """Run by the client when the user accepts a suggestion (the item's ``command``)."""
        if args and isinstance(args[0], str) and (err := server.ctx.acceptance.event("accepted", args[0])):
            server.tell(str(err))
