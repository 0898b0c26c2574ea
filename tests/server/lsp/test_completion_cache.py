"""The completion cache through the real server: a request repeated after a restart needs no model."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

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

pytestmark = [pytest.mark.model, pytest.mark.asyncio]

TEXT = "def mean(xs):\n    total = sum(xs)\n    return \n"
LINE, COL = 2, len("    return ")

# A file long enough that its full prompt takes far longer than the small first prompt.
_HELPER = "def helper_{0}(values):\n    return [v * {0} for v in values]\n\n\n"
COLD_TEXT = "".join(_HELPER.format(i) for i in range(40)) + TEXT
COLD_OPTIONS = {**MODEL_OPTIONS, "firstSuggestionMs": 200}


async def _complete_once(
    home: Path, workspace: Path, text: str = TEXT, options: dict[str, object] | None = None
) -> tuple[list[str], dict[str, object]]:
    client = await start(["-m", model_path()], env(home), options=options or MODEL_OPTIONS)
    try:
        assert (await wait_model(client))["model"]["state"] == "ready"
        uri = (workspace / "stats.py").as_uri()
        open_doc(client, uri, text)
        line = text.count("\n", 0, text.index("    return \n"))
        # Automatic, as while typing: an invoked request would wait for the full prompt.
        texts = insert_texts(
            await client.text_document_inline_completion_async(inline_params(uri, line, COL, invoked=False))
        )
        return texts, await status(client)
    finally:
        await stop(client)


async def test_a_request_repeated_after_a_restart_is_answered_from_the_disk_cache(tmp_path: Path) -> None:
    home, workspace = tmp_path / "home", tmp_path / "ws"
    first, st = await _complete_once(home, workspace)
    assert first and first[0].strip(), st["last"]
    assert st["last"]["engine"]["stop_reason"] != "cached"  # type: ignore[index]
    assert st["last"]["engine"]["tokens_evaluated"] > 0  # type: ignore[index]
    again, st = await _complete_once(home, workspace)
    assert again == first
    assert st["last"]["engine"]["stop_reason"] == "cached", st["last"]  # type: ignore[index]
    assert st["last"]["engine"]["tokens_evaluated"] == 0  # type: ignore[index]
    assert st["requests"]["cache_hits"] == 1 and st["requests"]["completed"] == 0  # type: ignore[index]
    assert (home / "completions" / "data.mdb").exists()
    assert st["cache"]["completions"]["disk_hits"] == 1  # type: ignore[index]


async def test_a_cold_places_small_prompt_answer_is_not_kept_for_that_place(tmp_path: Path) -> None:
    """At a place the KV cache does not cover, the first answer comes from a small prompt (no
    repository context, a short window). It is shown, but not cached — also not on disk, where it
    used to outlive the cold prompt — so asking again at that place runs the model, on the full
    prompt once that is warm."""
    home, workspace = tmp_path / "home", tmp_path / "ws"
    _, st = await _complete_once(home, workspace, COLD_TEXT, COLD_OPTIONS)
    assert st["model"]["small_first_prompts"] >= 1, st["model"]  # type: ignore[index]
    assert st["last"]["engine"]["stop_reason"] != "cached"  # type: ignore[index]
    _, st = await _complete_once(home, workspace, COLD_TEXT, COLD_OPTIONS)
    assert st["last"]["engine"]["stop_reason"] != "cached", st["last"]  # type: ignore[index]
    assert st["requests"]["cache_hits"] == 0  # type: ignore[index]


async def _open_cold(client: LanguageClient, tmp_path: Path) -> tuple[str, int]:
    """Wait for the model, open ``COLD_TEXT``: the document's URI and the line of its cursor."""
    assert (await wait_model(client))["model"]["state"] == "ready"
    uri = (tmp_path / "ws" / "stats.py").as_uri()
    open_doc(client, uri, COLD_TEXT)
    return uri, COLD_TEXT.count("\n", 0, COLD_TEXT.index("    return \n"))


async def test_an_invoked_request_at_a_cold_place_is_answered_from_the_full_prompt(tmp_path: Path) -> None:
    """Automatic at a cold place: the small first prompt. Invoked there (the user asked): the full
    prompt. (The deadlines' part is the suggester's unit test; here both are generous, as a shared
    CI machine can be slow.)"""
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=COLD_OPTIONS)
    try:
        uri, line = await _open_cold(client, tmp_path)
        auto = inline_params(uri, line, COL, invoked=False)
        await client.text_document_inline_completion_async(auto)
        st = await status(client)
        assert st["model"]["small_first_prompts"] >= 1  # (an idle prefetch may take one too)  # type: ignore[index]
        small_prompt = st["last"]["engine"]["prompt_tokens"]  # type: ignore[index]
        invoked = await client.text_document_inline_completion_async(inline_params(uri, line, COL))
        st = await status(client)
        assert st["last"]["trigger"] == "invoked"  # type: ignore[index]
        assert st["last"]["engine"]["prompt_tokens"] > small_prompt + 400, st["last"]  # type: ignore[index]
        assert insert_texts(invoked), st["last"]
    finally:
        await stop(client)


async def test_an_invoked_request_typed_into_a_cold_suggestion_reads_the_full_prompt(tmp_path: Path) -> None:
    """Typing the first character of the small prompt's suggestion: an automatic request gets the
    rest of it (typed-through, no model); an invoked one there asks for the full prompt instead."""
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=COLD_OPTIONS)
    try:
        uri, line = await _open_cold(client, tmp_path)
        auto = insert_texts(
            await client.text_document_inline_completion_async(inline_params(uri, line, COL, invoked=False))
        )
        st = await status(client)
        assert auto and len(auto[0].strip()) > 1, st["last"]
        small_prompt = st["last"]["engine"]["prompt_tokens"]  # type: ignore[index]
        typed = auto[0][0]
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(version=2, uri=uri),
                [
                    types.TextDocumentContentChangePartial(
                        types.Range(types.Position(line, COL), types.Position(line, COL)), typed
                    )
                ],
            )
        )
        after = inline_params(uri, line, COL + len(typed), invoked=False)
        assert insert_texts(await client.text_document_inline_completion_async(after)) == [auto[0][1:]]
        st = await status(client)
        assert st["last"]["engine"]["stop_reason"] == "typed_through", st["last"]  # type: ignore[index]
        await client.text_document_inline_completion_async(inline_params(uri, line, COL + len(typed)))
        st = await status(client)
        assert st["last"]["engine"]["stop_reason"] != "typed_through", st["last"]  # type: ignore[index]
        assert st["last"]["engine"]["prompt_tokens"] > small_prompt + 400, st["last"]  # type: ignore[index]
    finally:
        await stop(client)


async def test_an_invoked_request_past_its_deadline_shows_what_the_small_prompt_answered(
    tmp_path: Path,
) -> None:
    """Invoked at a cold place with a deadline no full prompt can meet: the answer the automatic
    request got there from the small prompt, not an empty one."""
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=COLD_OPTIONS)
    try:
        uri, line = await _open_cold(client, tmp_path)
        auto = insert_texts(
            await client.text_document_inline_completion_async(inline_params(uri, line, COL, invoked=False))
        )
        assert auto and auto[0].strip(), (await status(client))["last"]
        client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(
                settings={"fimble": {**COLD_OPTIONS, "deadlineMs": 50, "invokedDeadlineMs": 50}}
            )
        )
        for _ in range(250):  # a notification has no reply: wait until the status shows it
            if (await status(client))["settings"].get("invoked_deadline_ms") == 50:
                break
            await asyncio.sleep(0.02)
        asked = await client.text_document_inline_completion_async(inline_params(uri, line, COL))
        st = await status(client)
        assert st["last"]["outcome"] == "deadline_provisional", st["last"]  # type: ignore[index]
        assert insert_texts(asked) == auto
    finally:
        await stop(client)


async def test_a_cold_places_first_prompt_is_the_local_window(tmp_path: Path) -> None:
    """A cold place's first prompt gives the lines below the cursor their whole budget (128 tokens
    by default, a third of 384) and the rest to the lines above: no other file's snippets, which
    did not help in so few tokens (``first_budgets``), although the full prompt there has one."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = COLD_TEXT + "".join(_HELPER.format(i) for i in range(40, 80))
    (workspace / "stats.py").write_text(text)
    other = "def scale(xs, k):\n    return [x * k for x in xs]\n"
    (workspace / "other.py").write_text(other)
    client = await start(["-m", model_path()], env(tmp_path / "home"), options=COLD_OPTIONS, root=workspace)
    try:
        assert (await wait_model(client))["model"]["state"] == "ready"
        other_uri = (workspace / "other.py").as_uri()
        open_doc(client, other_uri, other)  # a region visited in another file: context for stats.py
        await client.text_document_inline_completion_async(inline_params(other_uri, 1, 4, invoked=False))
        uri = (workspace / "stats.py").as_uri()
        open_doc(client, uri, text)
        line = text.count("\n", 0, text.index("    return \n"))

        async def parts(invoked: bool) -> dict[str, int]:
            await client.text_document_inline_completion_async(inline_params(uri, line, COL, invoked=invoked))
            explain = (await status(client))["last"]["explain"]  # type: ignore[index]
            assert explain["provisional"] is not invoked, explain  # automatic: the first prompt
            out: dict[str, int] = {}
            for p in explain["parts"]:
                out[p["kind"]] = out.get(p["kind"], 0) + p["tokens"]
            return out

        first = await parts(invoked=False)
        assert "context" not in first, first
        assert 90 <= first["suffix"] <= 140, first  # whole lines in 128 tokens, not in 42
        assert first["prefix"] >= 200, first
        assert "context" in await parts(invoked=True)  # the full prompt: the other file's region
    finally:
        await stop(client)
