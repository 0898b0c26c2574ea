"""Golden cases for the suggestion's shape, the stop rules and the cleaning, one folder per case.

``golden/<rule>/<case>/`` holds:

- ``input.<ext>``: the document, with ``<CURSOR>`` where the cursor is (the extension names the
  language; ``.txt``, ``.mk`` are files without a grammar);
- ``model.txt`` (optional): what the model generated there, raw and byte for byte (a final newline is
  part of it); it is fed to the stop rules one character at a time, as the engine feeds them one
  token at a time, then cleaned;
- ``setting.toml`` (optional): ``multiline = true|false``, the `multiline` setting's always/never
  (absent: auto);
- ``expected.toml``: ``multiline`` and ``reason`` (the shape), and with ``model.txt`` ``stop`` (the stop
  reason, ``eog`` when no rule fired) and ``text`` (the suggestion shown).

Both are read byte for byte: a file saved with CRLF line ends keeps its ``\r\n`` (``golden/.gitattributes``
stops git from converting them), and ``expected.toml`` writes a ``\r`` as the escape ``\r``.

``FIMBLE_GOLDEN_UPDATE=1 pytest tests/completion/test_golden.py`` rewrites every ``expected.toml`` from
what the code does now; review the diff before committing it.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

import pytest

from fimble.completion.output.postprocess import clean_completion
from fimble.completion.output.shape import analyze, resolve_language, stop_context
from fimble.completion.output.stops import make_stop_check

GOLDEN = Path(__file__).parent / "golden"
CURSOR = "<CURSOR>"
UPDATE = os.environ.get("FIMBLE_GOLDEN_UPDATE") == "1"


def _cases() -> list[Path]:
    return sorted(p for p in GOLDEN.glob("*/*") if p.is_dir())


def _read(path: Path) -> str:
    """The file's text as saved: no universal newlines, so CRLF cases are CRLF."""
    with path.open(encoding="utf-8", newline="") as f:
        return f.read()


def _input(case: Path) -> tuple[str, str, str | None]:
    (path,) = [p for p in case.iterdir() if p.name.startswith("input.")]
    text = _read(path)
    assert text.count(CURSOR) == 1, f"{path}: exactly one {CURSOR} marker"
    prefix, suffix = text.split(CURSOR)
    return prefix, suffix, resolve_language(None, path.name)


def run_case(case: Path) -> dict[str, object]:
    """What the code does on one case, in the shape of ``expected.toml``."""
    prefix, suffix, language = _input(case)
    setting = case / "setting.toml"
    forced = tomllib.loads(setting.read_text("utf-8")) if setting.exists() else {}
    syntax = analyze(prefix, suffix, language, forced.get("multiline"))
    out: dict[str, object] = {"multiline": syntax.multiline, "reason": syntax.reason}
    model = case / "model.txt"
    if model.exists():
        raw = _read(model)
        ctx = stop_context(prefix, suffix, syntax)
        check = make_stop_check(ctx)
        text, stop = raw, "eog"
        for i in range(1, len(raw) + 1):
            if (hit := check(raw[:i])) is not None:
                stop, keep = hit
                text = raw[:i][:keep]
                break
        out["stop"] = stop
        out["text"] = clean_completion(text, ctx)
    return out


def _toml(values: dict[str, object]) -> str:
    lines = []
    for key, value in values.items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, str) and "\n" in value:
            escaped = value.replace("\\", "\\\\").replace('"""', '\\"""').replace("\r", "\\r")
            lines.append(f'{key} = """\n{escaped}"""')
        else:
            escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\r", "\\r")
            lines.append(f'{key} = "{escaped}"')
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("case", _cases(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_golden(case: Path) -> None:
    got = run_case(case)
    expected_file = case / "expected.toml"
    if UPDATE or not expected_file.exists():
        expected_file.write_text(_toml(got), "utf-8")
        if not UPDATE:
            pytest.fail(f"{expected_file} was missing and has been written: review it")
    assert got == tomllib.loads(expected_file.read_text("utf-8"))


def test_every_rule_has_cases() -> None:
    rules = {p.parent.name for p in _cases()}
    wanted = {"shape", "suffix_repeat", "indent", "repetition", "bracket_balance", "quote_balance", "overlap"}
    wanted |= {"line_start", "crlf"}  # a cursor in a line's leading whitespace; CRLF files
    assert wanted <= rules, wanted - rules
