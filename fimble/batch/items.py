"""Input lines of ``fimble batch``: what each asks for, or why it cannot be run.

Three kinds, one per line: ``path`` + ``line``/``col`` (a place in a workspace file, 1-based, with
repository context as the server would gather it), ``prefix``/``suffix`` (FIM) or ``prompt`` (plain
text). A line that is not valid JSON or asks for something impossible becomes an ``ItemError`` with
the line number: the run reports it and goes on.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from fimble.completion.prompt.raw_prompt import RawPrompt
from fimble.completion.raw_requests import GenerationOptions
from fimble.errors import FimbleError

__all__ = ["BatchItem", "ItemError", "PositionResolver", "parse_items"]

_MAX_TOKENS = 1024

# (path, 1-based line, 1-based col) -> the file's prefix/suffix at that place, with context files.
PositionResolver = Callable[[str, int, int], RawPrompt]


@dataclass(frozen=True)
class BatchItem:
    id: str
    raw: RawPrompt
    options: GenerationOptions
    line_no: int


@dataclass(frozen=True)
class ItemError:
    """An input line that cannot be run; ``id`` is the line's own when it had one."""

    id: str
    line_no: int
    error: str


def _id_of(obj: dict[str, object]) -> str:
    value = obj.get("id")
    if isinstance(value, (str, int)) and not isinstance(value, bool) and str(value):
        return str(value)
    raise ValueError("every line needs an `id` (a string or a number)")


def _options(obj: dict[str, object]) -> GenerationOptions:
    max_tokens = obj.get("max_tokens", 64)
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= _MAX_TOKENS:
        raise ValueError(f"`max_tokens` must be an integer from 1 to {_MAX_TOKENS}")
    stop = obj.get("stop", ())
    if isinstance(stop, str):
        stop = (stop,)
    if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
        raise ValueError("`stop` must be a string or a list of non-empty strings")
    multiline = obj.get("multiline")
    if multiline is not None and not isinstance(multiline, bool):
        raise ValueError("`multiline` must be true, false or absent")
    return GenerationOptions(max_tokens=max_tokens, stop=tuple(stop), multiline=multiline)


def _raw(obj: dict[str, object], resolve: PositionResolver | None) -> RawPrompt:
    if "path" in obj and ("line" in obj or "col" in obj):
        path, line, col = obj["path"], obj.get("line"), obj.get("col", 1)
        if not isinstance(path, str) or not path:
            raise ValueError("`path` must be a file path")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (line, col)):
            raise ValueError("`line` and `col` must be 1-based integers")
        if resolve is None:
            raise ValueError("positions in files are not supported here")
        return resolve(path, line, col)  # type: ignore[arg-type]
    if "prefix" in obj or "suffix" in obj:
        prefix, suffix = obj.get("prefix", ""), obj.get("suffix", "")
        if not isinstance(prefix, str) or not isinstance(suffix, str):
            raise ValueError("`prefix` and `suffix` must be strings")
        path = obj.get("path")
        return RawPrompt(prefix, suffix, fim=True, path=path if isinstance(path, str) else None)
    if "prompt" in obj:
        prompt = obj["prompt"]
        if not isinstance(prompt, str):
            raise ValueError("`prompt` must be a string")
        return RawPrompt(prompt)
    raise ValueError("a line needs `path` + `line`/`col`, `prefix`/`suffix`, or `prompt`")


def parse_items(
    lines: Iterable[str], resolve: PositionResolver | None = None
) -> Iterator[BatchItem | ItemError]:
    """One ``BatchItem`` or ``ItemError`` per non-blank input line, in order.

    A repeated id is an error on its later lines: the journal and the output are keyed by id.
    """
    seen: set[str] = set()
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        item_id = f"line:{line_no}"
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("a line must be a JSON object")
            item_id = _id_of(obj)
            if item_id in seen:
                raise ValueError(f"id {item_id!r} was used on an earlier line")
            seen.add(item_id)
            yield BatchItem(item_id, _raw(obj, resolve), _options(obj), line_no)
        except (ValueError, OSError) as err:  # json.JSONDecodeError is a ValueError
            yield ItemError(item_id, line_no, str(err))
        except FimbleError as err:  # a resolver's refusal (no such file, not text): this line only
            yield ItemError(item_id, line_no, str(err) or type(err).__name__)
