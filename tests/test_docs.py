"""The README and the manual: both languages in step, every link resolving, the generated pages current.

The manual is `docs/<page>.md` in English and `docs/zh-CN/<page>.md` in Chinese. No model, no network.
"""

from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path
from types import ModuleType
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
ZH = DOCS / "zh-CN"
READMES = (ROOT / "README.md", ROOT / "README.zh-CN.md")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")


def _english_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if ZH not in p.parents)


def _chinese_pages() -> list[Path]:
    return sorted(ZH.rglob("*.md"))


def _prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks."""
    out, fenced = [], False
    for line in text.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return out


def _headings(text: str) -> list[tuple[int, str]]:
    return [(len(m[1]), m[2]) for line in _prose_lines(text) if (m := _HEADING.match(line))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links and images: their text
    text = re.sub(r"<[^>]+>", "", text).lower()
    kept = (c for c in text if c in " -_" or unicodedata.category(c)[0] in "LMN")
    return "".join(kept).replace(" ", "-")


def anchors(text: str) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _level, heading in _headings(text):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def _links(text: str) -> list[str]:
    return [m[1] for line in _prose_lines(text) for m in _LINK.finditer(_CODE_SPAN.sub("", line))]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fimble_docs_generate", DOCS / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pairs() -> list[tuple[Path, Path]]:
    return [READMES, *((p, ZH / p.relative_to(DOCS)) for p in _english_pages())]


def _name(path: Path) -> str:
    return str(path.relative_to(ROOT))


# -- the slug rule itself, pinned on headings GitHub has rendered ------------------------------------


@pytest.mark.parametrize(
    ("heading", "expected"),
    [
        ("Measuring quality (`fimble eval`)", "measuring-quality-fimble-eval"),
        ("衡量质量（`fimble eval`）", "衡量质量fimble-eval"),
        ("单行还是整块，以及建议在哪里停止", "单行还是整块以及建议在哪里停止"),
        ("落到哪颗 CPU 上", "落到哪颗-cpu-上"),
        ("HTTP (Continue, llama.vim/llama.vscode)", "http-continue-llamavimllamavscode"),
        ("`POST /v1/completions`", "post-v1completions"),
    ],
)
def test_slug_follows_github(heading: str, expected: str) -> None:
    assert slug(heading) == expected


# -- both languages in step ---------------------------------------------------------------------------


def test_every_page_is_in_both_languages() -> None:
    english = {p.relative_to(DOCS) for p in _english_pages()}
    chinese = {p.relative_to(ZH) for p in _chinese_pages()}
    assert english - chinese == set(), "pages without a Chinese version in docs/zh-CN/"
    assert chinese - english == set(), "Chinese pages without an English version in docs/"


@pytest.mark.parametrize(("english", "chinese"), _pairs(), ids=lambda p: _name(p))
def test_both_languages_have_the_same_headings(english: Path, chinese: Path) -> None:
    if not chinese.exists():
        pytest.fail(f"{_name(chinese)} is missing")
    en = _headings(english.read_text(encoding="utf-8"))
    zh = _headings(chinese.read_text(encoding="utf-8"))
    assert [level for level, _ in en] == [level for level, _ in zh], "heading levels differ:\n" + "\n".join(
        f"{'#' * a} {x}  |  {'#' * b} {y}" for (a, x), (b, y) in zip(en, zh, strict=False)
    )


# -- links --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("page", [*READMES, *_english_pages(), *_chinese_pages()], ids=_name)
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    broken = []
    for target in _links(text):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        path = (page.parent / unquote(path_part)).resolve() if path_part else page
        if not path.exists():
            broken.append(f"{target}: no such file")
            continue
        if ROOT not in (path, *path.parents):
            broken.append(f"{target}: outside the repository")
            continue
        if anchor:
            if path.suffix != ".md":
                broken.append(f"{target}: an anchor into a file that is not Markdown")
            elif unquote(anchor) not in anchors(path.read_text(encoding="utf-8")):
                broken.append(f"{target}: no heading with that anchor in {_name(path)}")
    assert broken == []


# -- generated pages ----------------------------------------------------------------------------------


def test_generated_pages_are_what_make_docs_makes_now() -> None:
    pytest.importorskip("starlette")  # the HTTP API page renders the app's OpenAPI document
    stale = [
        _name(path)
        for path, text in _generator().pages().items()
        if not path.exists() or path.read_text(encoding="utf-8") != text
    ]
    assert stale == [], "out of date: run `make docs` (a new setting needs its text in settings_doc.py)"


def test_every_environment_variable_fimble_reads_is_documented() -> None:
    from fimble.server.settings_doc import ENVIRONMENT, INTERNAL_ENVIRONMENT

    used = set()
    for source in (ROOT / "fimble").rglob("*.py"):
        used |= set(re.findall(r"\bFIMBLE_[A-Z][A-Z0-9_]*\b", source.read_text(encoding="utf-8")))
    documented = {v.name for v in ENVIRONMENT} | INTERNAL_ENVIRONMENT
    assert used - documented == set(), "add them to ENVIRONMENT in fimble/server/settings_doc.py"


def test_the_docs_generator_is_not_imported_at_run_time() -> None:
    importers = [
        _name(source)
        for source in (ROOT / "fimble").rglob("*.py")
        if source.name != "settings_doc.py" and "settings_doc" in source.read_text(encoding="utf-8")
    ]
    assert importers == []


# -- the README stays a front page ---------------------------------------------------------------------


@pytest.mark.parametrize("readme", READMES, ids=_name)
def test_readme_is_a_front_page(readme: Path) -> None:
    text = readme.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300, "move detail into docs/ and link it"
    for command in ("make run", "make test"):  # a CI hook greps README.md for both
        assert command in text
