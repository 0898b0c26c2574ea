"""A class's data attributes from its source lines: dataclass fields and ``__init__``'s ``self.x``."""

from __future__ import annotations

from pathlib import Path

from fimble.completion.context.fields import SourceLines, class_fields, init_attributes

SOURCE = '''@dataclass
class WebSearchTool:
    """A hosted tool."""

    user_location: UserLocation | None = None
    # a comment
    search_context_size: Literal["low", "medium", "high"] = "medium"
    _private: int = 0
    KIND = "web"

    def name(self) -> str:
        x: int = 1
        return "web_search"


class TranscriptionSpanData:
    def __init__(self, input: str | None = None, input_format: str | None = "pcm") -> None:
        self.input = input
        self.input_format = input_format
        self._hidden = 1
        self.input = None
        if input:
            self.model: str = "whisper"
'''.splitlines()


def test_fields_are_the_class_level_assignments_at_body_depth() -> None:
    assert class_fields(SOURCE, 1, 12) == [
        "user_location: UserLocation | None = None",
        'search_context_size: Literal["low", "medium", "high"] = "medium"',
        'KIND = "web"',
    ]
    assert class_fields(SOURCE, 1, 12, limit=1) == ["user_location: UserLocation | None = None"]
    assert class_fields(SOURCE, 1, 12, width=30)[1].endswith(" ...")


def test_init_attributes_are_public_self_assignments_once_each() -> None:
    assert init_attributes(SOURCE, 16, 22) == [
        "self.input = input",
        "self.input_format = input_format",
        'self.model: str = "whisper"',
    ]


def test_source_lines_reads_workspace_files_and_gives_nothing_on_failure(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    read = SourceLines(tmp_path)
    assert read("a.py") == ["x = 1", "y = 2"]
    assert read("missing.py") == []
    assert SourceLines(None)("a.py") == []

    class Index:
        root = tmp_path

    assert SourceLines.of(Index())("a.py") == ["x = 1", "y = 2"]
    assert SourceLines.of(object())("a.py") == []
