"""The file's own imports read for a prefix that starts below them."""

from __future__ import annotations

from fimble.completion.context.header import import_header


def test_python_top_level_imports_with_their_name_lists() -> None:
    prefix = (
        '"""Doc."""\n'
        "import os\n"
        "from .utils import (\n"
        "    a,\n"
        "    b,\n"
        ")\n"
        "\n"
        "def f():\n"
        "    import json\n"  # a function's own import says nothing about the file
        "    return os.pa"
    )
    rows = import_header(prefix, "pkg/mod.py")
    assert [row for row, _ in rows] == [1, 2, 3, 4, 5]
    assert "".join(text for _, text in rows) == "import os\nfrom .utils import (\n    a,\n    b,\n)\n"


def test_typescript_imports() -> None:
    prefix = "import { a } from './a';\nimport {\n  b,\n} from './b';\n\nexport function f() {\n  return "
    rows = import_header(prefix, "src/f.ts")
    assert [row for row, _ in rows] == [0, 1, 2, 3]


def test_the_cursors_own_line_and_other_languages_are_left_out() -> None:
    assert import_header("import os\nimport s", "m.py") == [(0, "import os\n")]
    assert import_header("use std::io;\nfn main() {", "main.rs") == []
    assert import_header("import os\n", None) == []
