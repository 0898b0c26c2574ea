"""A slot's bookkeeping without a model: the record of its cells, reuse plans, parking, saved states,
and the decoder's record keeping for rows of several slots."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from fimble.completion.engine import EngineConfig
from fimble.completion.engine.batch import check_fits
from fimble.completion.engine.decoder import Decoder
from fimble.completion.engine.kvstore import KVStore
from fimble.completion.engine.slot import Slot
from fimble.errors import Cancelled, EngineError
from tests.fakes import FakeKV

A = list(range(100, 140))  # a repository chunk
B = list(range(200, 230))  # another one
C = list(range(300, 320))  # the file


def slot(kv: FakeKV, **kw: Any) -> Slot:
    return Slot(kv, 0, park=1, reuse_min_chunk=8, restore_min_gain=8, **kw)


def test_a_cold_prompt_is_evaluated_whole_and_recorded() -> None:
    kv = FakeKV()
    s = slot(kv)
    assert s.prepare(A + C, kv.decode) == (0, len(A + C))
    assert s.cells == A + C == kv.tokens(0)


def test_a_shared_prefix_is_kept_and_only_the_tail_evaluated() -> None:
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A + C, kv.decode)
    prompt = [*A, *C[:10], 999, 998]
    assert s.prepare(prompt, kv.decode) == (len(A) + 10, 2)
    assert s.cells == prompt == kv.tokens(0)
    assert kv.decodes[-1] == [(len(A) + 10, 999), (len(A) + 11, 998)]


def test_the_last_prompt_token_is_evaluated_even_when_cached() -> None:
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A, kv.decode)
    assert s.prepare(A, kv.decode) == (len(A) - 1, 1)
    assert kv.tokens(0) == A


def test_a_moved_chunk_is_shifted_parked_and_brought_back_in_order() -> None:
    """B moves right past a new chunk; the tokens before it are evaluated while it is parked in
    sequence 1 (llama.cpp takes tokens only right after what a sequence holds)."""
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A + B + C, kv.decode)
    new = [7, 7, 7]
    prompt = A + new + B + C
    reused, evaluated = s.prepare(prompt, kv.decode, reuse_limit=len(A + new + B))
    assert (reused, evaluated) == (len(A) + len(B), len(new) + len(C))
    assert s.cells == prompt == kv.tokens(0)
    assert kv.held(1) == {}  # nothing left parked
    assert s.tokens_shifted == len(B)
    assert [d[0][0] for d in kv.decodes[-2:]] == [len(A), len(A + new + B)]


def test_without_shifts_only_the_prefix_is_reused() -> None:
    kv = FakeKV(can_shift=False)
    s = slot(kv)
    s.prepare(A + B + C, kv.decode)
    prompt = [*A, 7, *B, *C]
    assert s.prepare(prompt, kv.decode, reuse_limit=len(prompt)) == (len(A), 1 + len(B + C))
    assert s.cells == prompt == kv.tokens(0) and s.tokens_shifted == 0


def test_an_aborted_evaluation_leaves_a_truthful_record() -> None:
    """Cancelled with a chunk parked: the chunk is dropped with everything after the hole, and the
    record ends where the sequence really ends, so the next prompt evaluates the rest again."""
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A + B + C, kv.decode)
    prompt = A + [7] * 5 + B + C
    kv.abort_at = len(A) + 2
    with pytest.raises(Cancelled):
        s.prepare(prompt, kv.decode, reuse_limit=len(A) + 5 + len(B))
    assert s.cells == A == kv.tokens(0)
    assert kv.held(1) == {}
    kv.abort_at = None
    assert s.prepare(prompt, kv.decode) == (len(A), len(prompt) - len(A))
    assert s.cells == prompt == kv.tokens(0)


def test_truncate_drops_cells_and_anything_after_a_hole() -> None:
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A, kv.decode)
    s.cells[5] = -1  # a hole, as an unfinished plan leaves
    s.truncate(20)
    assert s.cells == A[:5] == kv.tokens(0)


def test_clear_leaves_other_sequences_alone() -> None:
    kv = FakeKV()
    interactive, batch = slot(kv), Slot(kv, 2)
    interactive.prepare(A, kv.decode)
    batch.prepare(B, kv.decode)
    batch.clear()
    assert batch.cells == [] and kv.held(2) == {}
    assert kv.tokens(0) == A == interactive.cells


def test_a_slot_without_parking_refuses_to_move_chunks_past_missing_tokens() -> None:
    kv = FakeKV()
    s = Slot(kv, 2)
    s.prepare(A + B, kv.decode)
    with pytest.raises(ValueError, match="park"):
        s.prepare([*A, 7, *B], kv.decode, reuse_limit=len(A + B) + 1)


def test_snapshot_goes_through_the_parking_sequence_and_restore_reads_it_back(tmp_path: Path) -> None:
    kv = FakeKV()
    s = slot(kv)
    s.store = KVStore(tmp_path)
    try:
        s.prepare(A + C, kv.decode)
        assert s.save_state(len(A), wait=True, slack=0, file_start=None)
        assert kv.held(1) == {}
        assert not s.save_state(len(A), wait=True, slack=0, file_start=None)  # already covered
        s.clear()
        kv.clear()
        prompt = A + B
        assert s.evaluation_cost(prompt) == len(B)
        assert s.prepare(prompt, kv.decode) == (len(A), len(B))
        assert s.tokens_restored == len(A) and s.cells == prompt == kv.tokens(0)
    finally:
        s.store.close()


def test_snapshot_stops_at_a_hole() -> None:
    kv = FakeKV()
    s = slot(kv)
    s.prepare(A, kv.decode)
    s.cells[10] = -1
    snap = s.snapshot(30)
    assert snap is not None and snap[0] == A[:10]
    s.cells[0] = -1
    assert s.snapshot(30) is None


# -- the decoder's rows of several slots -------------------------------------------------------------


class _Batch:
    def __init__(self, n: int) -> None:
        self.token = [0] * n
        self.pos = [0] * n
        self.n_seq_id = [0] * n
        self.seq_id = [[0] for _ in range(n)]
        self.logits = [False] * n
        self.n_tokens = 0


def _decoder(rc: int, seen: list[list[tuple[int, int, int, bool]]]) -> Decoder:
    """A decoder whose ``llama_decode`` records the batch and returns ``rc``."""

    def llama_decode(_ctx: object, batch: _Batch) -> int:
        rows = range(batch.n_tokens)
        seen.append([(batch.seq_id[i][0], batch.pos[i], batch.token[i], batch.logits[i]) for i in rows])
        return rc

    d = Decoder.__new__(Decoder)
    d.model = SimpleNamespace(ctx=object())  # type: ignore[assignment]
    d.config = EngineConfig(n_batch=8)
    d._ll = SimpleNamespace(llama_decode=llama_decode)
    d.batch = _Batch(8)
    d.cancel = None
    d._abort_armed = False
    return d


def test_rows_of_several_slots_go_in_one_batch_and_each_slot_records_its_own() -> None:
    kv = FakeKV()
    one, two = Slot(kv, 2), Slot(kv, 3)
    seen: list[list[tuple[int, int, int, bool]]] = []
    d = _decoder(0, seen)
    rows = [(one, 0, 11, False), (two, 0, 21, False), (one, 1, 12, True), (two, 1, 22, True)]
    assert d.decode_rows(rows) == 0
    assert seen == [[(2, 0, 11, False), (3, 0, 21, False), (2, 1, 12, True), (3, 1, 22, True)]]
    assert one.cells == [11, 12] and two.cells == [21, 22]


def test_a_failed_batch_truncates_each_slot_from_its_first_row() -> None:
    kv = FakeKV()
    one, two = Slot(kv, 2), Slot(kv, 3)
    one.cells, two.cells = [1, 2, 3], [4, 5]
    d = _decoder(2, [])
    assert d.decode_rows([(one, 3, 9, True), (two, 2, 9, True)]) == 2
    assert one.cells == [1, 2, 3] and two.cells == [4, 5]
    with pytest.raises(Cancelled):
        d.fail(2, "decoding")
    with pytest.raises(EngineError, match="code 1"):
        d.fail(1, "decoding")


def test_a_long_evaluation_is_split_into_batches_with_logits_for_the_last_token_only() -> None:
    kv = FakeKV()
    s = Slot(kv, 0, park=1)
    seen: list[list[tuple[int, int, int, bool]]] = []
    d = _decoder(0, seen)
    d.decode_at(s, [(p, 50 + p) for p in range(12)])
    assert [len(b) for b in seen] == [8, 4]
    assert [row[3] for b in seen for row in b] == [False] * 11 + [True]
    assert s.cells == [50 + p for p in range(12)]


# -- the batch budget ------------------------------------------------------------------------------


def test_batch_prompt_checks() -> None:
    with pytest.raises(EngineError, match="does not fit"):
        check_fits([A], len(A))
    with pytest.raises(EngineError, match="empty"):
        check_fits([[]], 100)
    with pytest.raises(ValueError, match="n_seq_max"):
        EngineConfig(n_seq_max=1)


def test_after_a_jump_within_a_file_its_lines_are_moved_into_place() -> None:
    """With the model's FIM marks, a prompt whose prefix starts further down the same file takes
    the lines both show from the cache; without them (or past ``reuse_limit`` = 0) it does not."""
    pre, suf, mid = 900, 901, 902
    lines = list(range(1000, 1200))
    old = [*A, pre, *lines[:160], suf, *lines[160:170], mid]
    new = [*A, pre, *lines[40:190], suf, *lines[190:200], mid]
    for marks, reused in (((pre, suf), len(A) + 1 + 120), (None, len(A) + 1)):
        kv = FakeKV()
        s = slot(kv, fim_marks=marks)
        s.prepare(old, kv.decode, reuse_limit=len(A))
        assert s.evaluation_cost(new, len(A)) == len(new) - reused
        assert s.prepare(new, kv.decode, reuse_limit=len(A)) == (reused, len(new) - reused)
        assert s.cells == new == kv.tokens(0)
    kv = FakeKV()
    s = slot(kv, fim_marks=(pre, suf))
    s.prepare(old, kv.decode)
    assert s.prepare(new, kv.decode)[0] == len(A) + 1  # reuse_limit 0: a raw prompt, head only
