"""The suggester on plain values: selected items, supersede, deadline, cancel, debounce.

A stub stands in for the shared completer (one module's unit test); the real engine path is covered
by the LSP tests in tests/server/lsp.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from fimble.completion.cache import Cached
from fimble.completion.engine import Generation
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.service import CompletionRequest, CompletionResult
from fimble.completion.worker import Job
from fimble.errors import Cancelled
from fimble.server.index_runner import IndexRunner, NullIndex
from fimble.server.settings import Settings
from fimble.server.suggest import Query, Suggester, apply_selected, mid_word


def _result(text: str, stop: str = "eog") -> CompletionResult:
    gen = Generation(text, (), stop, 10, 10, 0, 1.0, 1.0)
    return CompletionResult(text=text, multiline="\n" in text, generation=gen, parts=())


class StubCompleter:
    """Answers each job when the test says so; supersedes by key like the engine worker."""

    def __init__(self, ready: bool = True) -> None:
        self.ready = ready
        self.load_error: Exception | None = None
        self.jobs: list[tuple[CompletionRequest, Job[Any]]] = []
        self.cancelled: list[Job[Any]] = []
        self.last: dict[str, object] = {}
        self.model = "stub"
        self.ways: list[str] = []  # "made" / "released", in order

    def make_way(self) -> Callable[[], None]:
        self.ways.append("made")
        return lambda: self.ways.append("released")

    def answer_now(self, request: CompletionRequest, key: str | None) -> Job[CompletionResult] | None:
        return None

    def submit(self, request: CompletionRequest, key: str | None = None) -> Job[CompletionResult]:
        for _, old in self.jobs:
            if old.key == key and not old.future.done():
                old.cancel.cancel("superseded")
        job: Job[CompletionResult] = Job(lambda e, c: None, key)  # type: ignore[arg-type,return-value]
        self.jobs.append((request, job))
        return job

    def cancel(self, job: Job[Any]) -> None:
        job.cancel.cancel("cancelled")
        self.cancelled.append(job)


def _suggester(stub: StubCompleter) -> Suggester:
    return Suggester(stub, IndexRunner(NullIndex()))  # type: ignore[arg-type]


async def _until(predicate: Any) -> None:
    for _ in range(200):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError("condition not reached")


def test_selected_item_is_applied_before_completing() -> None:
    text = "obj.ap\nrest"
    assert apply_selected(text, 6, 4, 6, "append") == ("obj.append\nrest", 10)
    assert mid_word("foo(bar)", 4) and not mid_word("foo()", 4) and not mid_word("x", 1)


async def test_empty_until_the_model_is_ready() -> None:
    stub = StubCompleter(ready=False)
    s = _suggester(stub)
    assert await s.suggest(Query("u", "x = ", 4), Settings()) is None
    assert s.last["outcome"] == "model_loading" and not stub.jobs


async def test_a_secret_file_is_never_completed_nor_warmed() -> None:
    """A query the front door marked secret (``.env``) builds no request: nothing of it reaches a
    prompt, the completion cache or a saved KV state."""
    stub = StubCompleter()
    s = _suggester(stub)
    query = Query("u", "TOKEN=", 6, path=".env", invoked=True, secret=True)
    assert await s.suggest(query, Settings()) is None
    assert s.last["outcome"] == "secret_file"
    assert await s.warm(query, Settings()) is False
    assert not stub.jobs


async def test_serves_the_engine_text_with_an_id() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "x = ", 4, invoked=True), Settings(max_tokens=7)))
    await _until(lambda: stub.jobs)
    request, job = stub.jobs[0]
    assert (request.max_tokens, request.text, request.offset) == (7, "x = ", 4)
    job.future.set_result(_result("1"))
    suggestion = await task
    assert suggestion is not None and suggestion.text == "1" and len(suggestion.id) == 16
    assert s.last["outcome"] == "served"


async def test_batch_and_idle_work_make_way_while_the_context_is_gathered() -> None:
    """The way is made before the repository context is read and released once the job is in."""
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "x = ", 4, invoked=True), Settings()))
    await _until(lambda: stub.jobs)
    assert stub.ways == ["made", "released"]
    stub.jobs[0][1].future.set_result(_result("1"))
    assert await task is not None


async def test_a_newer_request_supersedes_the_running_one() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    first = asyncio.ensure_future(s.suggest(Query("u", "a", 1), Settings()))
    await _until(lambda: len(stub.jobs) == 1)
    second = asyncio.ensure_future(s.suggest(Query("u", "ab", 2), Settings()))
    await _until(lambda: len(stub.jobs) == 2)
    old, new = stub.jobs[0][1], stub.jobs[1][1]
    assert old.cancel.reason == "superseded"
    old.future.set_result(_result("partial", stop="cancelled"))
    new.future.set_result(_result("c = 1"))
    assert await first is None
    assert (await second).text == "c = 1"  # type: ignore[union-attr]


async def test_superseded_while_queued_is_empty() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "a", 1), Settings()))
    await _until(lambda: stub.jobs)
    stub.jobs[0][1].future.set_exception(Cancelled("superseded by a newer request"))
    assert await task is None


async def test_deadline_returns_the_whole_lines_generated_so_far() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "def f():\n    ", 13), Settings(deadline_ms=50)))
    await _until(lambda: stub.jobs and stub.jobs[0][1].cancel.cancelled)
    job = stub.jobs[0][1]
    assert job.cancel.reason == "deadline"
    job.future.set_result(_result("x = 1\n    y = 2\n    return x +", stop="cancelled"))
    suggestion = await task
    assert suggestion is not None and suggestion.partial
    assert suggestion.text == "x = 1\n    y = 2"


async def test_deadline_keeps_a_finished_line_whose_newline_the_clean_up_removed() -> None:
    """A block cut at its deadline after its first line: the cleaned text no longer ends that line
    with a newline, the raw generation does, so the line is shown (it used to show nothing)."""
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "def f():\n    ", 13), Settings(deadline_ms=50)))
    await _until(lambda: stub.jobs and stub.jobs[0][1].cancel.cancelled)
    raw = 'return "Hello World"\n\n    rv = app'
    gen = Generation(raw, (), "cancelled", 10, 10, 0, 1.0, 1.0)
    stub.jobs[0][1].future.set_result(
        CompletionResult(text='return "Hello World"', multiline=True, generation=gen, parts=())
    )
    suggestion = await task
    assert suggestion is not None and suggestion.partial and suggestion.text == 'return "Hello World"'


async def test_a_deadline_while_the_prompt_is_read_lets_the_evaluation_run_on() -> None:
    stub = StubCompleter()
    stub.detach = lambda job: True  # type: ignore[attr-defined]
    s = _suggester(stub)
    assert await s.suggest(Query("u", "x = ", 4), Settings(deadline_ms=50)) is None
    assert not stub.jobs[0][1].cancel.cancelled  # not aborted: the next keystroke waits for it
    assert s.last["outcome"] == "deadline_prompt"


async def test_deadline_with_no_whole_line_is_empty() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "x = ", 4), Settings(deadline_ms=50)))
    await _until(lambda: stub.jobs and stub.jobs[0][1].cancel.cancelled)
    stub.jobs[0][1].future.set_result(_result("compute(", stop="cancelled"))
    assert await task is None


class BlockStub(StubCompleter):
    """A block being written: ``lines`` are its finished lines once the test sets them."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: str | None = None
        self.asked: list[CompletionRequest] = []

    def lines_so_far(self, job: Job[Any], request: CompletionRequest) -> CompletionResult | None:
        self.asked.append(request)
        return None if self.lines is None else _result(self.lines, stop="adopted_lines")


async def test_past_the_first_suggestion_time_a_block_shows_its_finished_lines() -> None:
    stub = BlockStub()
    s = _suggester(stub)
    settings = Settings(first_suggestion_ms=20, deadline_ms=60_000)
    task = asyncio.ensure_future(s.suggest(Query("u", "def f():\n    ", 13), settings))
    await _until(lambda: stub.asked)  # past firstSuggestionMs: it looks, nothing whole yet
    assert not task.done()
    stub.lines = "x = 1\n    y = 2"
    suggestion = await asyncio.wait_for(task, 5)
    assert suggestion is not None and suggestion.partial and suggestion.text == "x = 1\n    y = 2"
    assert s.last["early_lines"] and not stub.jobs[0][1].cancel.cancelled  # written on


async def test_a_block_done_before_the_first_suggestion_time_is_shown_whole() -> None:
    stub = BlockStub()
    stub.lines = "x = 1"
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "x", 1), Settings(first_suggestion_ms=60_000)))
    await _until(lambda: stub.jobs)
    stub.jobs[0][1].future.set_result(_result("x = 1\ny = 2"))
    suggestion = await task
    assert suggestion is not None and suggestion.text == "x = 1\ny = 2" and not suggestion.partial
    assert not stub.asked


@pytest.mark.parametrize(("invoked", "first_ms"), [(True, 1), (False, 0)])
async def test_an_invoked_request_or_no_latency_target_waits_for_the_whole_block(
    invoked: bool, first_ms: int
) -> None:
    stub = BlockStub()
    stub.lines = "x = 1"
    s = _suggester(stub)
    settings = Settings(first_suggestion_ms=first_ms, deadline_ms=60_000)
    task = asyncio.ensure_future(s.suggest(Query("u", "x", 1, invoked=invoked), settings))
    await _until(lambda: stub.jobs)
    await asyncio.sleep(0.1)
    assert not task.done() and not stub.asked
    stub.jobs[0][1].future.set_result(_result("x = 1\ny = 2"))
    assert (await task).text == "x = 1\ny = 2"  # type: ignore[union-attr]


async def test_client_cancel_stops_the_job_and_propagates() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "x", 1), Settings()))
    await _until(lambda: stub.jobs)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    job = stub.jobs[0][1]
    assert stub.cancelled == [job] and job.cancel.cancelled
    assert s.last["outcome"] == "cancelled"


async def test_debounce_drops_requests_overtaken_while_waiting() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    settings = Settings(debounce_ms=40)
    first = asyncio.ensure_future(s.suggest(Query("u", "a", 1), settings))
    await asyncio.sleep(0.01)
    second = asyncio.ensure_future(s.suggest(Query("u", "ab", 2), settings))
    await _until(lambda: stub.jobs)
    assert await first is None
    stub.jobs[0][1].future.set_result(_result("c"))
    assert (await second).text == "c"  # type: ignore[union-attr]
    assert len(stub.jobs) == 1  # the overtaken request never reached the engine


async def test_invoked_requests_skip_the_debounce() -> None:
    stub = StubCompleter()
    s = _suggester(stub)
    task = asyncio.ensure_future(s.suggest(Query("u", "a", 1, invoked=True), Settings(debounce_ms=5000)))
    await _until(lambda: stub.jobs)
    stub.jobs[0][1].future.set_result(_result("b"))
    assert (await task) is not None
    assert isinstance(stub.jobs[0][1].cancel, CancelToken)


async def test_an_invoked_request_asks_for_the_full_prompt_and_waits_longer() -> None:
    """The user asked: no small first prompt, and the longer deadline (an automatic request at the
    same place, the short one)."""
    stub = StubCompleter()
    s = _suggester(stub)
    settings = Settings(deadline_ms=50, invoked_deadline_ms=5000)
    auto = asyncio.ensure_future(s.suggest(Query("a", "x = ", 4), settings))
    await _until(lambda: len(stub.jobs) == 1 and stub.jobs[0][1].cancel.reason == "deadline")
    stub.jobs[0][1].future.set_result(_result("", "cancelled"))  # cut at 50 ms
    assert await auto is None and s.last.get("deadline_hit")
    invoked = asyncio.ensure_future(s.suggest(Query("b", "x = ", 4, invoked=True), settings))
    await _until(lambda: len(stub.jobs) == 2)
    await asyncio.sleep(0.2)  # past the automatic deadline: still waiting
    assert not invoked.done()
    stub.jobs[1][1].future.set_result(_result("1"))
    assert (await invoked).text == "1"  # type: ignore[union-attr]
    assert [request.full_prompt for request, _ in stub.jobs] == [False, True]


class DetachingCompleter(StubCompleter):
    """A completer whose prompt is still being read at the deadline (``detach``), and which holds
    a small first prompt's answer for some places."""

    def __init__(self, provisional: dict[str, Cached]) -> None:
        super().__init__()
        self.known = provisional

    def detach(self, job: Job[Any]) -> bool:
        return True

    def provisional(self, request: CompletionRequest) -> Cached | None:
        return self.known.get(request.text)


async def test_an_invoked_request_past_its_deadline_shows_the_small_prompts_answer() -> None:
    """The full prompt is not read in time: the answer already shown there beats nothing."""
    s = _suggester(DetachingCompleter({"x = ": Cached("1", False)}))
    settings = Settings(deadline_ms=20, invoked_deadline_ms=50)
    shown = await s.suggest(Query("a", "x = ", 4, invoked=True), settings)
    assert shown is not None and shown.text == "1" and shown.stop_reason == "provisional"
    assert s.last["outcome"] == "deadline_provisional" and s.last["deadline_hit"]
    # Where no small prompt answered, and for an automatic request, it stays empty.
    assert await s.suggest(Query("b", "y = ", 4, invoked=True), settings) is None
    assert s.last["outcome"] == "deadline_prompt"
    assert await s.suggest(Query("c", "x = ", 4), settings) is None


class ReadingCompleter(StubCompleter):
    """A completer whose model has nothing to show for each job (``nothing_to_show``: its prompt is
    being read) until the test answers the job; past the wait, ``detach`` lets the reading go on."""

    def __init__(self) -> None:
        super().__init__()
        self.detached: list[Job[Any]] = []

    def nothing_to_show(self, job: Job[Any]) -> bool:
        return not job.future.done()

    def detach(self, job: Job[Any]) -> bool:
        self.detached.append(job)
        return True


async def test_a_request_waits_past_its_deadline_while_its_prompt_is_read() -> None:
    """A cold place's first prompt is bounded and its answer is the one worth showing: past the
    deadline the request waits on while the prompt is read, up to ``invokedDeadlineMs``."""
    stub = ReadingCompleter()
    s = _suggester(stub)
    auto = asyncio.ensure_future(s.suggest(Query("a", "x = ", 4), Settings(deadline_ms=20)))
    await _until(lambda: s.last.get("waited_past_deadline"))  # past the 20 ms deadline, still waiting
    assert not auto.done() and not stub.detached
    stub.jobs[0][1].future.set_result(_result("1"))
    assert (await auto).text == "1"  # type: ignore[union-attr]
    assert not s.last.get("deadline_hit")
    # A prompt still read at invokedDeadlineMs: the automatic request gives up (the reading goes on).
    short = Settings(deadline_ms=20, invoked_deadline_ms=100)
    assert await s.suggest(Query("b", "y = ", 4), short) is None
    assert s.last["outcome"] == "deadline_prompt" and s.last["deadline_hit"] and stub.detached
