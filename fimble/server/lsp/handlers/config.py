"""Settings from initializationOptions and workspace/didChangeConfiguration, applied field by field.

A connection's settings are its own (``ls.settings``): they travel with its requests
(``Settings.tuning``, budgets, ``multiline``) and are never written into the engine, which every
connection shares. Only what is one per process is applied to the process: the model and threads
(a switch, ``SharedCompleter.ensure``) and the KV state store's size (``kvStateMb``), each only when
this client sets or changes it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from fimble.completion import warmup
from fimble.errors import FimbleError
from fimble.server.lsp.progress import watch_model
from fimble.server.settings import Raw, merge_raw, resolve, section

if TYPE_CHECKING:
    from fimble.server.lsp.server import FimbleServer

__all__ = ["apply", "pull", "register"]

log = logging.getLogger(__name__)


def _check_model(model: str | None) -> None:
    """Raises the model manager's actionable error when ``model`` cannot be loaded (runs in a thread)."""
    from fimble.models import store

    store.resolve(model)


async def _switch_model(ls: FimbleServer, model: str | None, threads: int, *, initial: bool) -> bool:
    ctx = ls.ctx
    if (model, threads) == (ctx.completer.model, ctx.completer.threads):
        return True
    if model != ctx.completer.model:
        try:
            await asyncio.to_thread(_check_model, model)
        except FimbleError as err:
            current = ctx.completer.model or "the default model"
            ls.tell(f"fimble.model: {err}; keeping {current}", types.MessageType.Error)
            return False
    old = ctx.completer.ensure(model, threads)
    if old is not None:
        ls.background.spawn(asyncio.to_thread(old.close))
        if not initial:  # after `initialized`; before it, that handler starts the watch
            ls.background.spawn(watch_model(ls))
    return True


async def apply(ls: FimbleServer, raw: Raw, *, initial: bool = False) -> None:
    """Merge ``raw`` into the connection's settings; report each bad field; switch model if asked."""
    ls.raw_settings = merge_raw(ls.raw_settings, raw)
    resolved = resolve(ls.raw_settings)
    for problem in resolved.problems:
        ls.tell(problem)
    old, new = ls.settings, resolved.settings
    ls.settings = new
    if initial or new.enable != old.enable:
        ls.enabled = new.enable
    ls.ctx.acceptance.enabled = new.acceptance_log
    if new.kv_state_mb != old.kv_state_mb:  # process-wide: one store per model (the idle step applies it)
        warmup.configure(replace(warmup.current_config(), kv_state_mb=new.kv_state_mb))
    if initial or new.index_exclude != old.index_exclude:
        ls.ctx.index.configure(ls.roots, new.index_exclude)
    model = new.model or ls.ctx.model
    threads = new.threads or ls.ctx.threads
    if not await _switch_model(ls, model, threads, initial=initial):
        ls.settings = replace(new, model=old.model)


async def pull(ls: FimbleServer) -> None:
    """Settings given as client configuration (e.g. Neovim's ``settings = {fimble = ...}``)."""
    workspace = ls.client_capabilities.workspace
    if not (workspace and workspace.configuration):
        return
    try:
        items = [types.ConfigurationItem(section="fimble")]
        result = await asyncio.wait_for(
            ls.workspace_configuration_async(types.ConfigurationParams(items=items)), 5.0
        )
    except Exception as err:
        log.info("workspace/configuration failed: %s", err)
        return
    if result and isinstance(result[0], dict):
        await apply(ls, result[0])


def register(server: FimbleServer) -> None:
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(params: types.DidChangeConfigurationParams) -> None:
        settings: Any = params.settings
        if isinstance(settings, dict) and settings:
            await apply(server, section(settings))
            return
        await pull(server)  # an empty notification means "ask me" (the pull model)
