"""The pygls server object: one per client connection, over a process-wide ``ServeContext``.

``FimbleProtocol`` adjusts pygls where the server must behave differently:

- position encoding: UTF-8 whenever the client offers it (pygls takes the client's first choice);
- documents live in ``fimble.server.documents`` (snapshots, one position codec), not pygls' workspace;
- a request whose params do not even parse gets an InvalidParams response (pygls would log and never
  answer, leaving the editor waiting);
- ``exit`` ends this connection through ``on_exit`` instead of ``sys.exit``, so one TCP client
  leaving does not stop the server other clients (and the HTTP server) use.

Features are registered by the modules in ``fimble.server.lsp.handlers`` (``create_server`` there
builds a server with all of them); each handler is short and calls helpers that work on plain values.
This module knows no handler, so the handlers can name the server without an import circle.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Generator
from pathlib import Path
from typing import Any

from cattrs import transform_error
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method

from fimble import __version__
from fimble.server.context import ServeContext
from fimble.server.documents import Documents
from fimble.server.positions import Encoding
from fimble.server.settings import Settings
from fimble.server.suggest import Suggester

__all__ = ["Background", "FimbleProtocol", "FimbleServer"]

log = logging.getLogger(__name__)


class Background:
    """Tasks a connection starts and does not await (progress watchers, config pulls)."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def spawn(self, work: Awaitable[Any]) -> asyncio.Future[Any]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Future[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (err := task.exception()) is not None:
            log.error("background task failed: %r", err, exc_info=err)

    def cancel_all(self) -> None:
        for task in list(self._tasks):
            task.cancel()


class _Rejected:
    """Stands in for a message that failed to parse and was already answered."""

    jsonrpc = "2.0"


class FimbleProtocol(LanguageServerProtocol):
    _server: FimbleServer

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(self, params: types.InitializeParams) -> Generator[Any, Any, types.InitializeResult]:
        result = yield from super().lsp_initialize(params)
        result.capabilities.position_encoding = self._server.encoding.value
        return result

    def _user(self, method: str, params: Any) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(method)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Generator:
        yield from self._user(types.TEXT_DOCUMENT_DID_OPEN, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Generator:
        yield from self._user(types.TEXT_DOCUMENT_DID_CHANGE, params)

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Generator:
        yield from self._user(types.TEXT_DOCUMENT_DID_CLOSE, params)

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        if (handler := self.fm.features.get(types.EXIT)) is not None:
            yield handler, args, None
        self._server.on_exit(0 if self._shutdown else 1)

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as err:
            if "id" in data and "method" in data:
                message = f"invalid params for {data['method']}: {_describe(err.__cause__ or err)}"
                self._send_response(data["id"], error=JsonRpcInvalidParams(message).to_response_error())
                return _Rejected()
            raise

    def handle_message(self, message: Any) -> None:
        if isinstance(message, _Rejected):
            return
        super().handle_message(message)


def _describe(error: BaseException) -> str:
    """cattrs' validation errors as short paths ("invalid value @ $.params.position")."""
    try:
        return "; ".join(transform_error(error))  # type: ignore[arg-type]
    except Exception:
        return str(error)


class FimbleServer(LanguageServer):
    """Per-connection state: documents, settings, roots; the model and index are shared."""

    def __init__(self, ctx: ServeContext, on_exit: Callable[[int], None] | None = None) -> None:
        super().__init__("fimble", __version__, protocol_cls=FimbleProtocol)
        self.ctx = ctx
        # Jobs are keyed by connection and document: clients sharing the model never supersede each other.
        self.connection_id = uuid.uuid4().hex[:8]
        self.documents = Documents()
        self.encoding = Encoding.UTF16
        self.raw_settings: dict[str, Any] = {}
        self.settings = Settings()
        self.enabled = True  # flipped by `fimble.toggle`; starts from settings.enable
        self.roots: list[Path] = []
        self.suggester = Suggester(ctx.completer, ctx.index)
        self._on_exit = on_exit
        self._told: set[str] = set()
        self.background = Background()

    def on_exit(self, code: int) -> None:
        log.info("client sent exit (code %d)", code)
        if self._on_exit is not None:
            self._on_exit(code)

    def tell(
        self, message: str, kind: types.MessageType = types.MessageType.Warning, *, once: bool = True
    ) -> None:
        """``window/showMessage``, each distinct message once per connection unless ``once`` is False."""
        if once and message in self._told:
            return
        self._told.add(message)
        log.log(logging.ERROR if kind == types.MessageType.Error else logging.WARNING, "%s", message)
        self.window_show_message(types.ShowMessageParams(type=kind, message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Log errors instead of a generic showMessage; user-facing problems are told by handlers."""
        level = logging.INFO if _expected(error) else logging.ERROR
        log.log(level, "request failed (%s): %s", getattr(source, "__name__", source), error)


_EXPECTED_CODES = {-32602, -32800, -32803}  # invalid params, cancelled, request failed: the client's doing


def _expected(error: BaseException | None) -> bool:
    return isinstance(error, JsonRpcException) and error.code in _EXPECTED_CODES


class _QuietExpected(logging.Filter):
    """pygls logs a traceback for every error response; for errors the client caused, one line will do."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and _expected(record.exc_info[1]):
            record.exc_info = None
            record.levelno, record.levelname = logging.INFO, "INFO"
            return logging.getLogger(record.name).isEnabledFor(logging.INFO)
        return True


logging.getLogger("pygls.protocol.json_rpc").addFilter(_QuietExpected())
