"""The imports a JavaScript or TypeScript file lacks: rows, bound and unbound names, statements."""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices, split_choices
from fimble.completion.context.js_imports import (
    barrel_choices,
    being_written,
    import_choices,
    import_rows,
    imported_names,
    module_spec,
    reexport_candidates,
    unbound_names,
)
from fimble.completion.engine.guide import EXPORT_MARGIN, MARGIN, ImportGuide, JsImportGuide, import_guide
from fimble.indexer.types import Definition, Span
from tests.real_index import gather_on_disk

HEAD = [
    "import { asyncScheduler } from '../scheduler/async';",
    "import {",
    "  SchedulerLike,",
    "  OperatorFunction as Op,",
    "} from '../types';",
    "import * as path from 'path';",
    "import Default, { type Other } from './other';",
    "export { thing } from './thing';",
    "",
    "const x = import('./lazy');",
]


def test_import_rows_cover_brace_lists_and_re_exports_not_dynamic_imports() -> None:
    assert import_rows(HEAD) == {0, 1, 2, 3, 4, 5, 6, 7}


def test_imported_names_read_defaults_namespaces_aliases_and_type_imports() -> None:
    names = imported_names(HEAD, import_rows(HEAD))
    assert names == {"asyncScheduler", "SchedulerLike", "Op", "path", "Default", "Other"}


def test_unbound_names_skip_declarations_parameters_keys_strings_and_globals() -> None:
    body = (
        "export function timeInterval<T>(scheduler: SchedulerLike = asyncScheduler): Func<T> {\n"
        "  return operate((source, subscriber) => {\n"
        "    let last = scheduler.now();\n"
        "    const { alpha, beta } = settings;\n"
        "    source.subscribe(createOperatorSubscriber(subscriber, (value: T) => {\n"
        "      // uses commentName\n"
        "      const now = Math.max(last, 'stringName');\n"
        "      subscriber.next(new TimeInterval(value, now - last, { interval: alpha }));\n"
        "    }));\n"
        "  });\n"
        "}\n"
        "export class TimeInterval<T> { constructor(public value: T, public interval: number) {} }\n"
        "items.forEach(item => done(item));\n"
    )
    found = unbound_names(body, {"SchedulerLike", "asyncScheduler"})
    assert set(found) == {"Func", "operate", "settings", "createOperatorSubscriber", "items", "done"}


def test_module_specs_are_relative_without_extension_and_index_files_are_directories() -> None:
    assert (
        module_spec("src/internal/operators/timeInterval.ts", "src/internal/util/lift.ts") == "../util/lift"
    )
    assert module_spec("src/internal/config.ts", "src/internal/types.ts") == "./types"
    assert module_spec("src/a/b.ts", "src/a/c/index.ts") == "./c"
    assert module_spec("src/a/b.ts", "src/a/index.ts") == "."
    assert module_spec("src/a/b.ts", "src/types.d.ts") == "../types"
    assert module_spec("src/a/b.ts", "src/a/b.py") is None


def _def(path: str, name: str, scope: str = "") -> Definition:
    qualname = f"{scope}.{name}" if scope else name
    return Definition(path, "typescript", "function", name, qualname, scope, Span(0, 0, 0, 0), "", "")


class _Index:
    def __init__(self, defs: list[Definition]) -> None:
        self.defs = defs

    def definitions(self, name: str, limit: int = 50) -> list[Definition]:
        return [d for d in self.defs if d.name == name][:limit]


def test_choices_are_statements_in_the_file_s_own_style() -> None:
    index = _Index(
        [
            _def("src/util/lift.ts", "operate"),
            _def("src/types.ts", "OperatorFunction"),
            _def("src/types.ts", "ObservableInput"),
            _def("src/Observable.ts", "pipe", scope="Observable"),  # a method: not importable
            _def("src/ops/map.py", "operate"),  # another language
        ]
    )
    lines = ['import {asyncScheduler} from "../scheduler/async"', ""]
    choices = import_choices(index, "src/ops/timeInterval.ts", lines, ["operate", "OperatorFunction", "pipe"])
    assert choices.modules == {"../util/lift": ("operate",), "../types": ("OperatorFunction",)}
    assert choices.as_text().splitlines()[0] == 'import {operate} from "../util/lift"'
    assert ImportChoices.from_text(choices.as_text()) == choices
    assert not import_choices(index, "src/ops/timeInterval.py", lines, ["operate"])


CHOICES = ImportChoices(
    {"../util/lift": ("operate",), "../types": ("OperatorFunction", "ObservableInput")}, language="js"
)


def test_viable_lines_name_what_one_module_gives_then_that_module() -> None:
    g = JsImportGuide(CHOICES)
    for line in (
        "",
        "imp",
        "import ",
        "import { ",
        "import { Obs",
        "import { ObservableInput, ",
        "import { ObservableInput, Operator",
        "import { operate }",
        "import { operate } from '../u",
        "import type { Operat",
    ):
        assert g.viable(line), line
    assert not g.viable("import { ObservableInput, operate")  # two modules
    assert not g.viable("import { operate } from '../types'")
    assert not g.viable("import { Observable }")
    assert g.finished("import { operate } from '../util/lift';")
    assert g.finished("import { operate } from '../util/lift'")
    assert not g.finished("import { operate } from '../util/lift")


def test_the_guide_holds_an_import_line_to_the_choices() -> None:
    g = import_guide(CHOICES, "x;\nimport { ")
    assert isinstance(g, JsImportGuide)
    ranked = [(0, "Subject", 4.0), (1, "operate", 2.0)]
    assert g.pick("", ranked) == 1
    assert import_guide(CHOICES, "x;\nconst y = ") is None
    free = JsImportGuide(CHOICES)
    assert free.pick("", [(0, "const", 9.0), (1, "import", 8.0)]) == 0 and free.released


def test_a_default_or_namespace_import_is_the_model_s_call() -> None:
    """The guide keeps to ``import { ...`` only once the line is committed to ``import ``; a byte-level
    BPE writes the space with the next word (`` React``, `` *``), so a default or namespace import
    the model starts releases the guide for good rather than being bent into braces."""
    for piece in (" React", " *", " type"):
        g = JsImportGuide(CHOICES, "import")
        assert g.pick("", [(0, piece, 5.0), (1, " {", 4.5)]) == 0 and g.released == (piece != " type"), piece


SIBLINGS = ImportChoices(
    {"../util/lift": ("operate",), "../types": ("OperatorFunction",)},
    language="js",
    siblings=("../util/", "../util/lift", "../util/isFunction", "../util/deep"),
)


def test_a_module_path_that_names_no_file_is_held_past_any_margin() -> None:
    line = "import { operate } from '../util/"
    sure = [(0, "operate", 30.0), (1, "lift", 1.0)]  # the model is sure of a file that is not there
    assert JsImportGuide(SIBLINGS, line).pick("", sure) == 1
    assert JsImportGuide(CHOICES, line).pick("", sure) == 0  # no siblings listed: the model's call
    for piece in ("isFunction", "deep", "lift.js"):  # a file or folder there, an ESM ending
        g = JsImportGuide(SIBLINGS, line)
        assert g.pick("", [(0, piece, 30.0), (1, "lift", 1.0)]) == 0 and g.released, piece
    # A package, a folder whose modules are not listed: the model's call.
    for typed, piece, fits in (("'", "rxjs", "../util/lift"), ("'../", "operators/map", "util/lift")):
        g = JsImportGuide(SIBLINGS, "import { operate } from " + typed)
        assert g.pick("", [(0, piece, 30.0), (1, fits, 1.0)]) == 0, piece
    whole = JsImportGuide(SIBLINGS, "import { operate } from '../util/lift")
    assert whole.pick("", [(0, "Ops';", 30.0), (1, "';", 1.0)]) == 1  # ``lift`` is there, ``liftOps`` is not


def test_a_name_the_file_imports_already_is_held_past_any_margin() -> None:
    bound = ImportChoices(
        {"../util/lift": ("operate",)}, language="js", bound=("asyncScheduler", "createOperatorSubscriber")
    )
    sure = [(0, "create", 30.0), (1, "operate", 1.0)]  # the model copies the import row below
    assert JsImportGuide(bound, "import { ").pick("", sure) == 1
    assert JsImportGuide(CHOICES, "import { ").pick("", sure) == 0  # nothing bound: the model's call
    for piece in ("of", "oper"):  # a name nothing binds yet (a package's), one of the choices
        g = JsImportGuide(bound, "import { ")
        assert g.pick("", [(0, piece, 30.0), (1, "operate", 1.0)]) == 0, piece
    listed = JsImportGuide(bound, "import { operate, ")
    assert listed.pick("", [(0, "asyncScheduler", 30.0), (1, "x", 29.0)]) == 0  # nothing fits: released
    held = JsImportGuide(bound, "import { ")
    assert held.pick("", sure) == 1 and held.held
    # Once held, the line stays guided: the model's ``}`` after an unfinished name does not release it.
    assert held.pick("oper", [(0, " }", 30.0), (1, "ate", 1.0)]) == 1 and not held.released


def test_a_token_ending_a_word_where_the_tokenizer_would_not_is_passed_over() -> None:
    # rxjs's index.ts, cold: `` operator`` (the model's ``operator``) led `` pairs`` by 0.3 among
    # the tokens that fit; after it, the ``s`` of ``operators`` was not among the best 1024.
    choices = ImportChoices(
        {
            "./internal/umd": ("operators",),
            "./internal/observable/pairs": ("pairs",),
            "./types": ("OperatorFunction",),
        },
        language="js",
        keyword="export",
        bound=("throwError",),
    )
    bpe = {" operators": [" operators"], " pairs": [" pairs"], " OperatorFunction": [" Operator", "Function"]}
    ranked = [(0, " throwError", 14.9), (1, " operator", 10.3), (2, " pairs", 10.0), (3, " operators", 9.7)]
    g = JsImportGuide(choices, "export {", margin=12.0)
    g.pieces = lambda text: bpe.get(text, list(text))
    assert g.pick("", ranked) == 2 and g.held
    split = JsImportGuide(choices, "export {", margin=12.0)
    split.pieces = g.pieces
    assert split.pick("", [(0, " throwError", 14.9), (1, " Operator", 10.3), (2, " pairs", 10.0)]) == 1
    # Without the tokenizer's word (a guide nobody gave ``pieces``), every end counts, as before.
    assert JsImportGuide(choices, "export {", margin=12.0).pick("", ranked) == 1


def test_a_list_goes_on_while_its_module_gives_more_missing_names() -> None:
    g = JsImportGuide(CHOICES, "import { ")
    assert g.pick("ObservableInput", [(0, " }", 3.0), (1, ",", 1.0)]) == 1
    assert g.pick("ObservableInput, OperatorFunction", [(0, " }", 3.0), (1, ",", 1.0)]) == 0  # all named
    assert g.pick("ObservableInput", [(0, " }", 9.0), (1, ",", 1.0)]) == 0  # the model is sure
    assert JsImportGuide(CHOICES, "import { ").pick("operate", [(0, " }", 3.0), (1, ",", 2.0)]) == 0


def test_on_a_real_index_a_typescript_import_line_gets_its_choices(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real tree-sitter and LMDB, rxjs's layout: an operator uses ``operate`` with its import blanked."""
    text = (
        "import { SchedulerLike } from '../types';\n\n\n"
        "export function timeInterval(scheduler: SchedulerLike) {\n  return operate(scheduler);\n}\n"
    )
    files = {
        "src/util/lift.ts": "export function operate<T>(init: T): T {\n  return init;\n}\n",
        "src/util/deep/index.ts": "export const deep = 1;\n",
        "src/types.ts": "export interface SchedulerLike {\n  now(): number;\n}\n",
        "src/operators/timeInterval.ts": text,
    }
    chunks = gather_on_disk(tmp_path, monkeypatch, files, "src/operators/timeInterval.ts", 1)
    assert chunks[-1].reason == IMPORT_CHOICES
    choices, rest = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None and choices.modules == {"../util/lift": ("operate",)}
    assert choices.siblings == ("../util/", "../util/lift", "../util/deep")  # what is there beside it
    assert choices.bound == ("SchedulerLike",)
    assert any(c[0] == "src/util/lift.ts" for c in rest)  # its definition is shown too
    guide = import_guide(choices, text[: text.index("\n\n") + 1])
    assert guide is not None and guide.finished("import { operate } from '../util/lift';")


def test_an_import_whose_module_is_not_written_yet_binds_nothing_yet() -> None:
    lines = [
        "import { observeNotification } from '..",
        "import {",
        "  OperatorFunction,",
        "} from '../types';",
        "import {",
        "  a,",
        "  b",
        "} from '",
    ]
    rows = import_rows(lines)
    assert being_written(lines, rows, 0) == {0}
    assert being_written(lines, rows, 3) == set()  # its module is written
    assert being_written(lines, rows, 7) == {4, 5, 6, 7}  # the names above are part of it
    assert being_written(["import { a } from './a';"], {0}, 0) == set()
    assert being_written(["const x = 1;"], set(), 0) == set()
    # The quote the editor closed: a module naming no file is still being written.
    closed = ["import { observeNotification } from '..';"]
    assert being_written(closed, {0}, 0, exists=lambda spec: spec == "../Notification") == {0}
    assert being_written(closed, {0}, 0, exists=lambda spec: True) == set()
    assert being_written(["import { x } from 'pkg';"], {0}, 0, exists=lambda spec: False) == set()


def test_on_a_real_index_the_module_of_names_already_typed_is_a_choice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rxjs's dematerialize.ts asked at ``import { observeNotification } from '..|``: the name is
    typed, the module is not, and the index knows where the name is defined."""
    text = (
        "import { observeNotification } from '..\n"
        "import { SchedulerLike } from '../types';\n\n"
        "export function dematerialize(scheduler: SchedulerLike) {\n"
        "  return observeNotification(scheduler);\n}\n"
    )
    files = {
        "src/Notification.ts": "export function observeNotification<T>(n: T): T {\n  return n;\n}\n",
        "src/types.ts": "export interface SchedulerLike {\n  now(): number;\n}\n",
        "src/operators/dematerialize.ts": text,
    }
    chunks = gather_on_disk(tmp_path, monkeypatch, files, "src/operators/dematerialize.ts", 0)
    choices, _ = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None and choices.modules == {"../Notification": ("observeNotification",)}
    guide = import_guide(choices, text[: text.index("\n")])
    assert guide is not None and guide.finished("import { observeNotification } from '../Notification';")
    # The names typed and a relative path begun: the index's module holds against a strong preference.
    assert guide.margin == EXPORT_MARGIN
    begun = import_guide(choices, "import { observeNotification } from '")
    assert begun is not None and begun.margin == MARGIN  # a package's name may come yet
    # As an editor has it, the quote closed: the same choices.
    files["src/operators/dematerialize.ts"] = text.replace("'..\n", "'..';\n", 1)
    chunks = gather_on_disk(tmp_path, monkeypatch, files, "src/operators/dematerialize.ts", 0)
    closed, _ = split_choices([c.as_tuple() for c in chunks])
    assert closed is not None and closed.modules == choices.modules


BARREL = [
    "/* Observable */",
    "export { Observable } from './internal/Observable';",
    "export { merge } from './internal/observable/merge';",
    "",
    "export { race } from './internal/observable/race';",
    "export type { Operator } from './internal/Operator';",
    "export * from './internal/types';",
]


class _Folders(_Index):
    """Files and subfolders per folder and outlines, as ``WorkspaceIndex.files_in``,
    ``folders_in`` and ``file_outline`` give them."""

    def files_in(self, folder: str) -> list[str]:
        return sorted({d.path for d in self.defs if d.path.rpartition("/")[0] == folder})

    def folders_in(self, folder: str) -> list[str]:
        inside = {d.path[len(folder) + 1 :] for d in self.defs if d.path.startswith(folder + "/")}
        return sorted({f"{folder}/{rest.split('/')[0]}" for rest in inside if "/" in rest})

    def file_outline(self, path: str) -> list[Definition]:
        return [d for d in self.defs if d.path == path]


def test_choices_list_the_modules_beside_them_for_the_guide() -> None:
    index = _Folders(
        [
            _def("src/util/lift.ts", "operate"),
            _def("src/util/isFunction.ts", "isFunction"),
            _def("src/util/deep/index.ts", "deep"),
            _def("src/ops/timeInterval.ts", "timeInterval"),  # the importer itself
            _def("src/ops/map.ts", "map"),
            _def("src/ops/notes.py", "notes"),
        ]
    )
    choices = import_choices(index, "src/ops/timeInterval.ts", [""], ["operate", "map"])
    assert choices.modules == {"../util/lift": ("operate",), "./map": ("map",)}
    listed = ("../util/", "../util/isFunction", "../util/lift", "../util/deep", "./", "./map")
    assert choices.siblings == listed
    assert ImportChoices.from_text(choices.as_text()) == choices


def test_a_barrel_is_offered_the_modules_it_does_not_re_export_yet() -> None:
    index = _Folders(
        [
            _def("internal/observable/merge.ts", "merge"),  # re-exported already
            _def("internal/observable/pairs.ts", "pairs"),
            _def("internal/observable/pairs.ts", "helper", scope="pairs"),  # not top level
            _def("internal/observable/race.ts", "raceInit"),  # a module already named
            _def("internal/Scheduler.ts", "Scheduler"),
            _def("internal/Observable.ts", "Observable"),
            _def("internal/util/noop.ts", "noop"),  # a folder the barrel draws nothing from
            _def("internal/observable/notes.py", "pairs_py"),  # not JavaScript
        ]
    )
    candidates = reexport_candidates(index, "index.ts", BARREL)
    assert candidates == {
        "./internal/Scheduler": ("internal/Scheduler.ts", ("Scheduler",)),
        "./internal/observable/pairs": ("internal/observable/pairs.ts", ("pairs",)),
    }
    choices = barrel_choices(candidates, BARREL, index, "index.ts", 4)
    assert choices.keyword == "export"
    assert choices.bound == ("Observable", "Operator", "merge")  # the cursor's row (``race``) aside
    assert choices.siblings[:2] == ("./internal/", "./internal/Observable")  # beside the candidates
    assert "./internal/observable/merge" in choices.siblings
    assert choices.modules == {spec: names for spec, (_, names) in candidates.items()}
    assert "export { pairs } from './internal/observable/pairs';" in choices.as_text().splitlines()
    assert ImportChoices.from_text(choices.as_text()) == choices
    # Between ``merge`` and ``race`` (sorted rows), only what sorts between them: ``pairs``.
    assert list(reexport_candidates(index, "index.ts", BARREL, 3)) == ["./internal/observable/pairs"]
    # ...and what another barrel written alike re-exports at the same spot, in order or not.
    beside = reexport_candidates(index, "index.ts", BARREL, 3, beside={"Scheduler"})
    assert sorted(beside) == ["./internal/Scheduler", "./internal/observable/pairs"]
    unsorted = [BARREL[0], BARREL[4], "", BARREL[2], *BARREL[5:]]
    assert len(reexport_candidates(index, "index.ts", unsorted, 2)) == 3  # all
    # Not a barrel: imports outnumber re-exports, or too few of them.
    assert reexport_candidates(index, "index.ts", [*BARREL[:3], *HEAD[:1] * 3]) == {}
    assert reexport_candidates(index, "index.py", BARREL) == {}


def test_the_guide_holds_a_barrel_line_to_a_module_not_re_exported_yet() -> None:
    choices = ImportChoices({"./internal/observable/pairs": ("pairs",)}, language="js", keyword="export")
    g = import_guide(choices, "\n".join(BARREL[:3]) + "\n")
    assert isinstance(g, JsImportGuide)
    assert g.viable("export { pa") and not g.viable("export { merge")
    assert g.finished("export { pairs } from './internal/observable/pairs';")
    assert g.pick("export { ", [(0, "merge", 6.0), (1, "pairs", 4.0)]) == 1
    assert not JsImportGuide(choices).committed("import { ")
    # The module a barrel lacks is one the model does not expect: its guide holds the line against
    # a strong preference (a row the file already has); JS guides look far down the ranking.
    assert g.margin > JsImportGuide(CHOICES).margin
    assert g.breadth == JsImportGuide(CHOICES).breadth > ImportGuide(ImportChoices({"m": ("a",)})).breadth


def test_on_a_real_index_a_barrel_line_gets_the_modules_not_re_exported_yet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real tree-sitter and LMDB: rxjs's ``index.ts`` with one re-export blanked."""
    names = ("merge", "pairs", "race", "zip")
    files = {f"internal/observable/{n}.ts": f"export function {n}() {{}}\n" for n in names}
    rows = [f"export {{ {n} }} from './internal/observable/{n}';" for n in names]
    rows[1] = ""
    text = "\n".join(["/* Observable */", *rows, ""])
    chunks = gather_on_disk(tmp_path, monkeypatch, files | {"index.ts": text}, "index.ts", 2)
    choices, _ = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None and choices.modules == {"./internal/observable/pairs": ("pairs",)}
    guide = import_guide(choices, "\n".join(text.split("\n")[:2]) + "\n")
    assert guide is not None and guide.finished("export { pairs } from './internal/observable/pairs';")


def test_on_a_real_index_a_barrel_row_out_of_order_is_kept_where_another_barrel_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """rxjs's ``operators/index.ts`` lists ``flatMap`` between ``mergeAll`` and ``mergeMap``, out of
    sorted order, as the root ``index.ts`` does; ``mergeInternals`` sorts between them. With the
    row blanked, the root barrel's row at the same spot keeps ``flatMap`` among the choices (the
    sorted neighbours alone offered ``mergeInternals`` only), and its lines are shown."""
    names = ("map", "max", "merge", "mergeAll", "flatMap", "mergeMap", "mergeScan", "min")
    files = {f"internal/operators/{n}.ts": f"export function {n}() {{}}\n" for n in names}
    files["internal/operators/mergeInternals.ts"] = "export function mergeInternals() {}\n"
    files["index.ts"] = "\n".join(f"export {{ {n} }} from './internal/operators/{n}';" for n in names) + "\n"
    rows = [f"export {{ {n} }} from '../internal/operators/{n}';" for n in names]
    rows[4] = ""
    text = "\n".join(rows) + "\n"
    chunks = gather_on_disk(
        tmp_path, monkeypatch, files | {"operators/index.ts": text}, "operators/index.ts", 4
    )
    choices, shown = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None
    assert set(choices.modules) == {"../internal/operators/flatMap", "../internal/operators/mergeInternals"}
    similar = next(c for c in shown if c[2].startswith("similar code"))
    assert "export { flatMap } from './internal/operators/flatMap';" in similar[1].splitlines()


def test_a_listed_name_may_be_bound_under_an_alias() -> None:
    g = JsImportGuide(CHOICES)
    for line in (
        "import { operate ",
        "import { operate as",
        "import { operate as op",
        "import { operate as op }",
    ):
        assert g.viable(line), line
    assert g.finished("import { operate as op } from '../util/lift';")
    assert not g.viable("import { Subject as S")
