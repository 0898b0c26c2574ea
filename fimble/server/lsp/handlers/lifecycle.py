"""initialize / initialized: negotiate encoding and features, take settings, report the model load."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types

from fimble.server.lsp.convert import uri_path
from fimble.server.lsp.handlers import completion, config
from fimble.server.lsp.progress import watch_index, watch_model
from fimble.server.positions import choose_encoding
from fimble.server.settings import section

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["WATCH_GLOB", "register"]

log = logging.getLogger(__name__)

# Source files whose changes on disk the index wants (the languages fimble indexes).
WATCH_GLOB = "**/*.{py,pyi,js,jsx,mjs,ts,tsx,go,rs,java,c,h,cc,cpp,hpp}"


def _roots(params: types.InitializeParams) -> list[Path]:
    uris = [f.uri for f in params.workspace_folders or []]
    if not uris and params.root_uri:
        uris = [params.root_uri]
    roots = [p for u in uris if (p := uri_path(u)) is not None]
    if not roots and params.root_path:
        roots = [Path(params.root_path)]
    return roots


def _check_cache_writable() -> str | None:
    from fimble.paths import cache_root

    root = cache_root()
    probe = root / ".fimble-write-test"
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as err:
        return (
            f"fimble cannot write to its cache {root} ({err.strerror}): completions work, but nothing "
            "is cached or logged. Fix the permissions, or start the server with FIMBLE_HOME set to a "
            "writable directory (e.g. FIMBLE_HOME=~/.cache/fimble fimble serve)."
        )
    return None


async def _register_watchers(ls: FimbleServer) -> None:
    caps = ls.client_capabilities.workspace
    watched = caps.did_change_watched_files if caps else None
    if not (watched and watched.dynamic_registration):
        return
    options = types.DidChangeWatchedFilesRegistrationOptions(
        watchers=[types.FileSystemWatcher(glob_pattern=WATCH_GLOB)]
    )
    registration = types.Registration(
        id="fimble-watch", method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=options
    )
    try:
        await asyncio.wait_for(
            ls.client_register_capability_async(types.RegistrationParams(registrations=[registration])), 5.0
        )
    except Exception as err:
        log.info("file watching not registered: %s", err)


def register(server: FimbleServer) -> None:
    @server.feature(types.INITIALIZE)
    async def initialize(params: types.InitializeParams) -> None:
        general = params.capabilities.general
        server.encoding = choose_encoding(general.position_encodings if general else None)
        server.roots = _roots(params)
        await config.apply(server, section(params.initialization_options), initial=True)
        completion.register_if_wanted(server, params.capabilities)
        log.info("client %s, encoding %s", params.client_info, server.encoding.value)

    @server.feature(types.INITIALIZED)
    async def initialized(params: types.InitializedParams) -> None:
        tasks = server.background
        tasks.spawn(watch_model(server))
        tasks.spawn(watch_index(server))
        tasks.spawn(config.pull(server))
        tasks.spawn(_register_watchers(server))
        if (problem := await asyncio.to_thread(_check_cache_writable)) is not None:
            server.tell(problem, types.MessageType.Error)

    @server.feature(types.SHUTDOWN)
    def shutdown(params: None) -> None:
        server.background.cancel_all()
