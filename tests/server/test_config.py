"""Settings per connection: two LSP connections on one shared completer; what one sends applies to
its own requests and never reaches the other's (nor the engine both share). No model: a fake engine."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fimble.completion import warmup
from fimble.completion.completer import Completer
from fimble.server.context import ServeContext
from fimble.server.index_runner import IndexRunner, NullIndex
from fimble.server.lsp.handlers.config import apply
from fimble.server.lsp.server import FimbleServer
from fimble.server.shared import SharedCompleter
from fimble.server.suggest import Query
from tests.completion.test_tuning import RecordingEngine, RecordingWarmer


@pytest.fixture
def two_connections(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[FimbleServer, FimbleServer, RecordingEngine, RecordingWarmer]]:
    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path))
    engine = RecordingEngine("append(x)")
    warmer = RecordingWarmer()

    def factory(model: str | None, threads: int, after: Callable[[], object] | None) -> Completer:
        return Completer(
            model,
            threads=threads,
            load=lambda: engine,  # type: ignore[arg-type, return-value]
            warmup=lambda _engine: warmer,  # type: ignore[arg-type, return-value]
            after=after,
            prefetch=False,
        )

    ctx = ServeContext(completer=SharedCompleter(None, 0, factory=factory), index=IndexRunner(NullIndex()))
    assert ctx.completer.wait_ready(5)
    yield FimbleServer(ctx), FimbleServer(ctx), engine, warmer
    ctx.close()


async def _suggest(server: FimbleServer, prefix: str) -> None:
    query = Query(f"file:///{server.connection_id}/{prefix}", prefix + "\n", len(prefix), path="a.py")
    assert await server.suggester.suggest(query, server.settings) is not None


async def test_one_connections_settings_leave_the_others_requests_alone(
    two_connections: tuple[FimbleServer, FimbleServer, RecordingEngine, RecordingWarmer],
) -> None:
    a, b, engine, warmer = two_connections
    before = warmup.current_config()
    await apply(a, {}, initial=True)
    await apply(b, {}, initial=True)
    await apply(a, {"speculative": False, "firstSuggestionMs": 0, "firstPromptTokens": 100})
    await _suggest(a, "xs.")
    await _suggest(b, "ys.")
    assert engine.seen == [False, "own"]  # b's request runs with the engine's own choice
    assert warmer.firsts == [(0, 100), (1600, 384)]
    assert engine.speculative is True  # nothing written into the shared engine
    assert warmup.current_config() == before  # nor into the process-wide warm-up settings
    await apply(b, {"speculative": False})
    await apply(a, {"speculative": True})
    await _suggest(a, "zs.")
    await _suggest(b, "ws.")
    assert engine.seen[2:] == ["own", False]
