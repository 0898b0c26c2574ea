"""The imports a JavaScript or TypeScript file lacks: rows, bound and unbound names, statements."""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.completion.context.imports import IMPORT_CHOICES, ImportChoices, split_choices
from fimble.completion.context.js_imports import (
    import_choices,
    import_rows,
    imported_names,
    module_spec,
    unbound_names,
)
from fimble.completion.engine.guide import JsImportGuide, import_guide
from fimble.indexer.types import Definition, Span

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
    from fimble.completion.context.gather import gather_context
    from fimble.indexer import IndexConfig, WorkspaceIndex

    monkeypatch.setenv("FIMBLE_HOME", str(tmp_path / "home"))
    root = tmp_path / "ws"
    (root / "src" / "util").mkdir(parents=True)
    (root / "src" / "operators").mkdir()
    (root / "src" / "util" / "lift.ts").write_text(
        "export function operate<T>(init: T): T {\n  return init;\n}\n"
    )
    (root / "src" / "types.ts").write_text("export interface SchedulerLike {\n  now(): number;\n}\n")
    text = (
        "import { SchedulerLike } from '../types';\n\n\n"
        "export function timeInterval(scheduler: SchedulerLike) {\n  return operate(scheduler);\n}\n"
    )
    (root / "src" / "operators" / "timeInterval.ts").write_text(text)
    with WorkspaceIndex.open(root, IndexConfig(workers=0)) as index:
        index.build()
        chunks = gather_context(index, "src/operators/timeInterval.ts", text, 1)
    assert chunks[-1].reason == IMPORT_CHOICES
    choices, rest = split_choices([c.as_tuple() for c in chunks])
    assert choices is not None and choices.modules == {"../util/lift": ("operate",)}
    assert any(c[0] == "src/util/lift.ts" for c in rest)  # its definition is shown too
    guide = import_guide(choices, text[: text.index("\n\n") + 1])
    assert guide is not None and guide.finished("import { operate } from '../util/lift';")
