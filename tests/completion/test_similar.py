"""Similar code cut to the spot that reads like the cursor's lines (``context.similar``)."""

from __future__ import annotations

from fimble.completion.context.similar import aligned_spot, window_around

_ROOT_BARREL = [
    "/* Operators */",
    "export { map } from './internal/operators/map';",
    "export { max } from './internal/operators/max';",
    "export { merge } from './internal/operators/merge';",
    "export { mergeAll } from './internal/operators/mergeAll';",
    "export { flatMap } from './internal/operators/flatMap';",
    "export { mergeMap } from './internal/operators/mergeMap';",
    "export { mergeScan } from './internal/operators/mergeScan';",
    "export { min } from './internal/operators/min';",
    "export { multicast } from './internal/operators/multicast';",
    "export { observeOn } from './internal/operators/observeOn';",
]


def test_a_barrel_written_in_the_same_order_gives_the_row_that_follows_the_cursors_neighbours() -> None:
    """rxjs ``operators/index.ts``: ``flatMap`` sits after ``mergeAll`` out of sorted order; the
    root barrel, written alike, says so at the spot whose rows above match the cursor's."""
    lines = [
        "export { max } from '../internal/operators/max';",
        "export { merge } from '../internal/operators/merge';",
        "export { mergeAll } from '../internal/operators/mergeAll';",
        "",
        "export { mergeMap } from '../internal/operators/mergeMap';",
    ]
    spot = aligned_spot(_ROOT_BARREL, 0, len(_ROOT_BARREL) - 1, lines, 3)
    assert spot == 5
    assert window_around(_ROOT_BARREL, spot, above=2, below=1).splitlines() == _ROOT_BARREL[3:7]


def test_what_is_typed_on_the_cursors_line_picks_among_spots_alike_above() -> None:
    other = [
        "def test_a(self, app):",
        "    rv = app.get('/')",
        "    assert rv.status_code == 200",
        "def test_b(self, app):",
        "    rv = app.get('/')",
        "    with pytest.raises(KeyError):",
    ]
    lines = ["def test_c(self, app):", "    rv = app.get('/x')", "    with "]
    assert aligned_spot(other, 0, 5, lines, 2) == 5  # ``with pytest.raises(KeyError):``
    lines[2] = "    assert "
    assert aligned_spot(other, 0, 5, lines, 2) == 2  # ``assert rv.status_code == 200``


def test_a_spot_past_the_windows_end_is_found_within_a_few_lines() -> None:
    """BM25 windows are cut at fixed rows: the line that follows the match may lie just past one."""
    other = [f"x{i} = {i}" for i in range(10)] + ["value = lastValue!", "emit(value)", "done()"]
    lines = ["x8 = 8", "x9 = 9", "value = lastValue!", ""]
    assert aligned_spot(other, 0, 9, lines, 3) == 11  # ``emit(value)``, two rows past the window


def test_the_window_keeps_a_few_lines_each_side_of_the_spot() -> None:
    rows = [str(i) for i in range(20)]
    assert window_around(rows, 10).splitlines() == rows[5:14]  # five before, three after
    assert window_around(rows, 1).splitlines() == rows[0:5]


def test_nothing_to_line_up_gives_nothing() -> None:
    assert aligned_spot([], 0, 0, ["a = 1", ""], 1) is None
    assert aligned_spot(["only one line"], 0, 0, ["a = 1", "b = 2", "c = 3", ""], 3) is None
    assert aligned_spot(["x = 1", "y = 2", "z = 3", "w"], 0, 3, ["[", "]", ""], 2) is None  # nothing alike
