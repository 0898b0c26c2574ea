"""From a cursor in a document snapshot to one suggestion, without ever blocking the event loop.

Both LSP features (inline completion and the completion fallback) and any other front door go
through ``Suggester.suggest``: debounce, cross-file context with a deadline, one job on the shared
engine worker keyed by document (a newer request supersedes an older one), a per-request deadline
after which the job is stopped and its whole lines are kept, and client cancellation passed down
to the engine as a cancel token (``fimble.completion.jobs``, as for HTTP). Everything here works
on plain values; LSP types stay in ``lsp/``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

from fimble.completion.completer import EARLY_LINES
from fimble.completion.context.imports import IMPORT_CHOICES
from fimble.completion.jobs import Awaiting
from fimble.completion.output.postprocess import finished_lines
from fimble.completion.report import explanation, generation_stats
from fimble.completion.service import CompletionRequest, CompletionResult
from fimble.completion.worker import Job
from fimble.errors import Cancelled, FimbleError
from fimble.server.index_runner import IndexRunner
from fimble.server.settings import Settings
from fimble.server.shared import SharedCompleter

__all__ = [
    "Query",
    "Suggester",
    "Suggestion",
    "apply_selected",
    "mid_word",
]

log = logging.getLogger(__name__)

_CONTEXT_TIMEOUT_S = 0.15
_EARLY_POLL_S = 0.05  # how often a request past ``firstSuggestionMs`` looks for a block's finished lines


@dataclass(frozen=True)
class Query:
    key: str  # supersede key: the document URI
    text: str
    offset: int  # code points
    path: str | None = None  # as shown to the model (workspace-relative)
    language: str | None = None
    invoked: bool = False  # the user asked (vs. automatic, while typing)
    received: float = 0.0  # time.monotonic() when the request arrived
    # On the secrets list (``.env``, keys): never completed, so its text reaches no prompt, cache or
    # saved KV state. (Decided by the front door, which knows the file's real path.)
    secret: bool = False


@dataclass(frozen=True)
class Suggestion:
    id: str
    text: str  # inserted at the cursor
    multiline: bool
    stop_reason: str
    partial: bool  # whole lines only: cut at the deadline, or taken from a block still being written
    latency_ms: float


def apply_selected(text: str, offset: int, start: int, end: int, selected: str) -> tuple[str, int]:
    """The document as if the completion widget's selected item were inserted over [start, end).

    The inline suggestion must extend that item, so the model continues after it.
    """
    start, end = sorted((max(0, start), min(len(text), end)))
    return text[:start] + selected + text[end:], start + len(selected)


def mid_word(text: str, offset: int) -> bool:
    """The cursor sits before an identifier character: the user is editing a word, not writing on."""
    return offset < len(text) and (text[offset].isalnum() or text[offset] == "_")


class Suggester:
    """Runs queries against the shared completer; remembers the last one's timeline for status."""

    def __init__(self, completer: SharedCompleter, index: IndexRunner) -> None:
        self.completer = completer
        self.index = index
        self._seq: dict[str, int] = {}
        self._focus_seq: dict[str, int] = {}
        self.last: dict[str, Any] = {}

    def _newest(self, key: str, seq: int) -> bool:
        return self._seq.get(key) == seq

    async def suggest(self, query: Query, settings: Settings) -> Suggestion | None:
        seq = self._seq[query.key] = self._seq.get(query.key, 0) + 1
        received = query.received or time.monotonic()
        timeline: dict[str, Any] = {
            "path": query.path,
            "trigger": "invoked" if query.invoked else "automatic",
        }
        self.last = timeline
        try:
            suggestion = await self._suggest(query, settings, seq, received, timeline)
        except asyncio.CancelledError:
            timeline["outcome"] = "cancelled"
            raise
        finally:
            timeline["total_ms"] = round((time.monotonic() - received) * 1000, 1)
        timeline.setdefault("outcome", "served" if suggestion else "empty")
        return suggestion

    async def _suggest(
        self, query: Query, settings: Settings, seq: int, received: float, timeline: dict[str, Any]
    ) -> Suggestion | None:
        if query.secret:
            timeline["outcome"] = "secret_file"
            return None
        if not self.completer.ready:
            timeline["outcome"] = "model_error" if self.completer.load_error else "model_loading"
            return None
        if not query.invoked and settings.debounce_ms:
            await asyncio.sleep(settings.debounce_ms / 1000)
            if not self._newest(query.key, seq):
                timeline["outcome"] = "superseded"
                return None
        wait_ms = settings.deadline_ms
        if query.invoked:  # the user asked: wait for the full prompt, never less than automatically
            wait_ms = max(wait_ms, settings.invoked_deadline_ms)
        deadline = received + wait_ms / 1000
        # Past its deadline an automatic request still waits while it has nothing to show (its prompt
        # is being read, or its first line is unfinished), up to the invoked deadline: that prompt is
        # bounded (a cold place's first prompt, ``firstPromptTokens``) and its answer is the one worth
        # showing, where giving up shows nothing.
        prompt_wait = received + max(wait_ms, settings.invoked_deadline_ms) / 1000
        text, offset = query.text, query.offset
        request = _request(query, settings)
        # Typing into the shown suggestion needs neither context nor model: answer before fetching.
        job = self.completer.answer_now(request, query.key)
        if job is None:
            t0 = time.monotonic()
            # Batch and idle work stop while the context is gathered, not only once the job is in.
            release = self.completer.make_way()
            try:
                context = await self.index.context_for(
                    query.path, text[:offset], text[offset:], min(_CONTEXT_TIMEOUT_S, max(0.0, deadline - t0))
                )
                timeline["context_ms"] = round((time.monotonic() - t0) * 1000, 1)
                timeline["context_files"] = sum(1 for c in context if c[2] != IMPORT_CHOICES)  # files shown
                if not self._newest(query.key, seq):
                    timeline["outcome"] = "superseded"
                    return None
                request = replace(request, context_files=context)
                job = self.completer.submit(request, key=query.key)
            finally:
                release()
        # An automatic request past ``firstSuggestionMs`` takes a block's finished lines rather than
        # wait (up to the deadline) for the rest; the block is written on for the next keystroke.
        # (0: no latency target, as for the first prompt.)
        early_ms = settings.first_suggestion_ms
        early = (received + early_ms / 1000, request) if early_ms and not query.invoked else None
        result = await self._await(job, deadline, prompt_wait, timeline, early=early)
        last = self.completer.last
        timeline["engine"] = generation_stats(result.generation) if result is not None else dict(last)
        if (
            result is None
            and query.invoked
            and timeline.get("outcome") == "deadline_prompt"
            and self._newest(query.key, seq)
        ):
            return self._provisional(request, received, timeline)
        if result is not None:  # what `fimble explain` shows, for `fimble.status`
            timeline["explain"] = explanation(result)
        if result is not None and not self._newest(query.key, seq):
            # A newer keystroke waits on the same generation (adopted); this answer is stale.
            timeline["outcome"] = "superseded"
            return None
        return self._interpret(result, job, received, timeline)

    async def warm(self, query: Query, settings: Settings) -> bool:
        """Start the suggestion where the editor says the cursor went, before a keystroke asks
        (``Completer.warm_at``). A newer focus on the same document makes this one moot."""
        if not self.completer.ready or query.secret:
            return False
        seq = self._focus_seq[query.key] = self._focus_seq.get(query.key, 0) + 1
        context = await self.index.context_for(
            query.path, query.text[: query.offset], query.text[query.offset :], _CONTEXT_TIMEOUT_S
        )
        if self._focus_seq.get(query.key) != seq:
            return False
        request = replace(_request(query, settings), context_files=context)
        return self.completer.warm_at(request, query.key)

    async def _await(
        self,
        job: Job[CompletionResult],
        deadline: float,
        prompt_wait: float,
        timeline: dict[str, Any],
        early: tuple[float, CompletionRequest] | None = None,
    ) -> CompletionResult | None:
        """Wait for ``job`` until ``deadline`` (until ``prompt_wait`` while it has nothing to show:
        the model is still reading its prompt, or its first line is unfinished); then stop it and
        take what it has. From ``early``'s time on, a block's finished lines answer at once
        (``_early_lines``). A cancelled request (``$/cancelRequest``) cancels the job (``Awaiting``).
        """
        waiting = Awaiting(job, self.completer.cancel)
        try:
            try:
                early_at, request = early or (deadline, None)
                if (
                    request is not None
                    and early_at < deadline
                    and (result := await self._early_lines(waiting, request, early_at, deadline))
                ):
                    # (a keystroke that joined a block gets its lines at once, before ``early_at``)
                    late = time.monotonic() >= early_at
                    timeline["early_lines"] = result.stop_reason == EARLY_LINES and late
                    return result
                return await waiting.result(max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                pending = getattr(self.completer, "nothing_to_show", None)
                if pending is not None and pending(job) and time.monotonic() < prompt_wait:
                    timeline["waited_past_deadline"] = True
                    with contextlib.suppress(TimeoutError):
                        return await waiting.result(max(0.0, prompt_wait - time.monotonic()))
                timeline["deadline_hit"] = True
                detach = getattr(self.completer, "detach", None)
                if detach is not None and detach(job):
                    # Still reading the prompt: nothing to show yet, but the evaluation goes on, so
                    # the next keystroke (which waits for it) is not back at the start.
                    timeline["outcome"] = "deadline_prompt"
                    return None
                job.cancel.cancel("deadline")
                return await waiting.result()
        except Cancelled:
            timeline["outcome"] = "superseded"
            return None
        except FimbleError as err:
            log.warning("completion failed: %s", err)
            timeline["outcome"] = "error"
            timeline["error"] = str(err)
            return None

    async def _early_lines(
        self, waiting: Awaiting[CompletionResult], request: CompletionRequest, early_at: float, until: float
    ) -> CompletionResult | None:
        """The job's result if it comes by ``early_at``; after that, until ``until``, the whole
        lines of the block (or of a statement left open: ``constructor() {``) it is writing as
        soon as there are any (``lines_so_far``), or its result if it ends first; None at ``until``.

        At a cold place a block ends seconds after its first line (a first prompt of ~300 tokens
        takes ~2.5 s on two cores, then ~12 tokens/s): served with no think time, 21 of 130 line
        starts waited for the 4 s deadline, their first line written before it."""
        take = getattr(self.completer, "lines_so_far", None)
        with contextlib.suppress(TimeoutError):
            return await waiting.result(max(0.0, early_at - time.monotonic()))
        while (left := until - time.monotonic()) > 0:
            if take is not None and (lines := take(waiting.job, request)) is not None:
                return lines
            with contextlib.suppress(TimeoutError):
                return await waiting.result(min(_EARLY_POLL_S, left))
        return None

    def _provisional(
        self, request: CompletionRequest, received: float, timeline: dict[str, Any]
    ) -> Suggestion | None:
        """An invoked request whose full prompt was not read by its deadline: the small first
        prompt's answer at this place, if there is one, rather than nothing (the full prompt reads
        on, so asking again once it is warm gets its answer)."""
        known = self.completer.provisional(request)
        if known is None or not known.text.strip():
            return None
        timeline["outcome"] = "deadline_provisional"
        timeline["chars"] = len(known.text)
        return Suggestion(
            id=uuid.uuid4().hex[:16],
            text=known.text,
            multiline=known.multiline,
            stop_reason="provisional",
            partial=False,
            latency_ms=round((time.monotonic() - received) * 1000, 1),
        )

    def _interpret(
        self, result: CompletionResult | None, job: Job[Any], received: float, timeline: dict[str, Any]
    ) -> Suggestion | None:
        if result is None:
            return None
        text, partial = result.text, result.stop_reason == EARLY_LINES
        if result.stop_reason == "cancelled":
            if job.cancel.reason != "deadline":
                timeline["outcome"] = "superseded"
                return None
            text, partial = finished_lines(text, result.generation.text), True
        if not text.strip():
            return None
        latency = (time.monotonic() - received) * 1000
        timeline["chars"] = len(text)
        return Suggestion(
            id=uuid.uuid4().hex[:16],
            text=text,
            multiline=result.multiline,
            stop_reason=result.stop_reason,
            partial=partial,
            latency_ms=round(latency, 1),
        )


def _request(query: Query, settings: Settings) -> CompletionRequest:
    """What to complete; an invoked query asks for the full prompt (see ``invoked_deadline_ms``)."""
    return CompletionRequest(
        text=query.text,
        offset=query.offset,
        path=query.path,
        language=query.language,
        max_tokens=settings.max_tokens,
        multiline=settings.multiline_flag,
        prefix_budget=settings.prefix_tokens,
        suffix_budget=settings.suffix_tokens,
        context_budget=settings.context_tokens,
        full_prompt=query.invoked,
        tuning=settings.tuning,
    )
