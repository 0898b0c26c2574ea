"""Class skeletons and receiver guesses: what ``obj.`` can be followed by, as compact context.

A call like ``app.route(`` or ``config.get_namespace(`` needs the *class's* API, which no import
names: ``app`` is a fixture or a parameter. Two pure helpers over index definitions: a skeleton
renders a class as its header plus one line per method signature (no bodies, cheap in tokens); a
receiver guess finds, among the classes of the files the current file can reach, the one that
defines most of the attributes the code near the cursor uses on a name (``app.route``,
``app.test_client`` -> ``Flask``): duck typing, without type inference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from fimble.completion.context.fields import class_fields, init_attributes

__all__ = [
    "DefinitionLike",
    "class_skeleton",
    "guess_receivers",
    "members_by_class",
    "method_in_class",
    "one_line",
    "returned_classes",
]

Source = Callable[[str], Sequence[str]]  # a workspace file's lines by relative path (``fields.SourceLines``)

_ATTR = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)")


class DefinitionLike(Protocol):
    """What the index's definition records offer here (and, with a span, to ``context``)."""

    path: str
    name: str
    kind: str
    qualname: str
    signature: str
    doc: str


def one_line(signature: str, limit: int = 160) -> str:
    """A signature on one line (whitespace collapsed: a multi-line parameter list costs as many
    tokens on one line, with less padding), its decorators kept above it — a skeleton without
    ``@setupmethod`` teaches the model that these methods have none. ``@overload`` is dropped (one
    line per name is shown). Too long, the parameter list is cut after a whole parameter and
    closed with ``...)`` so the line still reads as a signature."""
    kept = [ln.strip() for ln in signature.splitlines() if ln.strip()]
    decorators = [ln for ln in kept if ln.startswith("@") and "overload" not in ln]
    body = " ".join(ln for ln in kept if not ln.startswith("@"))
    body = re.sub(r"\(\s+", "(", re.sub(r",?\s+\)", ")", re.sub(r"\s+", " ", body)))
    if len(body) > limit:
        close = body.rfind(")")
        tail = body[close + 1 :] if close > 0 else ""
        head = body[: max(limit - len(tail) - 6, 0)]
        cut = head.rfind(", ")
        body = head[:cut] + ", ...)" + tail if cut > 0 and "(" in head[:cut] else body[:limit]
    return "\n".join([*decorators, body])


def members_by_class(defs: Iterable[DefinitionLike]) -> dict[str, list[DefinitionLike]]:
    """Methods (and other nested definitions) of each class, by the class's qualified name."""
    out: dict[str, list[DefinitionLike]] = {}
    for d in defs:
        scope = getattr(d, "scope", "")
        if scope:
            out.setdefault(scope, []).append(d)
    return out


def _indent(text: str, by: str = "    ") -> str:
    return "\n".join(by + ln for ln in text.splitlines())


def _span(d: object) -> tuple[int, int] | None:
    span = getattr(d, "span", None)
    if span is None:
        return None
    return int(getattr(span, "start_line", 0)), int(getattr(span, "end_line", 0))


def _header_end(lines: Sequence[str], start: int, end: int) -> int:
    """The row where the ``class X(...):`` header that starts at or after ``start`` ends (decorators
    and a multi-line base list skipped)."""
    row = start
    while row <= end and row < len(lines) and not lines[row].lstrip().startswith("class "):
        row += 1
    while row <= end and row < len(lines) and not lines[row].split("#")[0].rstrip().endswith(":"):
        row += 1
    return row


def _data_of(
    cls: DefinitionLike, members: Sequence[DefinitionLike], source: Source | None
) -> tuple[list[str], list[str]]:
    """The class's field lines and its ``__init__``'s ``self.x = ...`` lines, from its source."""
    span = _span(cls)
    if source is None or span is None or not cls.path.endswith(".py"):
        return [], []
    try:
        lines = source(cls.path)
    except Exception:  # no source, no fields: the skeleton still has the methods
        return [], []
    if not lines:
        return [], []
    start, end = span
    fields = class_fields(lines, _header_end(lines, start, end), end)
    init = next((m for m in members if m.name == "__init__"), None)
    init_span = _span(init) if init is not None else None
    attrs = init_attributes(lines, init_span[0], init_span[1]) if init_span else []
    return fields, attrs


def class_skeleton(
    cls: DefinitionLike,
    members: Sequence[DefinitionLike],
    wanted: set[str] = frozenset(),  # type: ignore[assignment]
    limit_chars: int = 1400,
    source: Source | None = None,
) -> str:
    """``class X(Base):`` with its doc line and one line per member: the names ``wanted`` (used near
    the cursor) first, then the class's data attributes when ``source`` can read its file (fields of
    a dataclass, ``self.x = ...`` under ``__init__``: what ``Cls(`` and ``obj.`` take), then public
    methods in source order; private and dunder members other than ``__init__`` are left out;
    overloads appear once. Cut to ``limit_chars``."""
    head = one_line(cls.signature, 200)
    if cls.doc:
        head += f'\n    """{cls.doc}"""' if cls.path.endswith(".py") else f"  // {cls.doc}"
    fields, attrs = _data_of(cls, members, source)
    seen: set[str] = set()
    first = [m for m in members if m.name in wanted]
    rest = [m for m in members if m.name not in wanted]
    lines: list[str] = []
    used = len(head)

    def add(line: str) -> bool:
        nonlocal used
        if used + len(line) + 1 > limit_chars:
            return False
        used += len(line) + 1
        lines.append(line)
        return True

    def method(m: DefinitionLike) -> bool:
        if m.name in seen or (m.name.startswith("_") and m.name != "__init__" and m.name not in wanted):
            return True
        seen.add(m.name)
        sig = one_line(m.signature)
        with_attrs = m.name == "__init__" and bool(attrs)
        if m.path.endswith(".py") and sig.endswith(":") and not with_attrs:
            sig += " ..."
        if not add(_indent(sig)):
            return False
        if with_attrs:
            for attr in attrs:
                if not add("        " + attr):
                    break
        return True

    for m in first:
        if not method(m):
            return "\n".join([head, *lines])
    for f in fields:
        if not add("    " + f):
            break
    for m in rest:
        if not method(m):
            break
    return "\n".join([head, *lines])


def method_in_class(method: DefinitionLike, cls: DefinitionLike | None) -> str:
    """A method's signature under its class's header, so the model sees whose method it is."""
    sig = one_line(method.signature)
    if method.doc:
        sig += f'\n    """{method.doc}"""' if method.path.endswith(".py") else f"  // {method.doc}"
    owner = method.qualname.rsplit(".", 1)[0]
    header = one_line(cls.signature, 200) if cls is not None else f"class {owner}:"
    if method.path.endswith(".py") and sig.splitlines()[-1].endswith(":") and not method.doc:
        sig += " ..."
    return f"{header}\n{_indent(sig)}"


def guess_receivers(
    text: str, classes: Mapping[str, Sequence[DefinitionLike]], *, skip: Iterable[str] = (), min_hits: int = 2
) -> list[tuple[str, str, int]]:
    """(receiver, class qualname, attributes matched) for names used as ``name.attr`` in ``text``
    whose attributes a single class defines at least ``min_hits`` of, best first. ``skip``: names
    that are modules or otherwise not objects (``self`` is always skipped)."""
    skipped = {"self", "cls", *skip}
    attrs: dict[str, set[str]] = {}
    for recv, attr in _ATTR.findall(text):
        if recv not in skipped:
            attrs.setdefault(recv, set()).add(attr)
    names = {qual: {m.name for m in members} for qual, members in classes.items()}
    out: list[tuple[str, str, int]] = []
    for recv, used in attrs.items():
        best = max(((len(used & have), qual) for qual, have in names.items()), default=(0, ""))
        if best[0] >= min_hits:
            out.append((recv, best[1], best[0]))
    out.sort(key=lambda t: -t[2])
    return out


_ASSIGNED_CALL = re.compile(
    r"^[ \t]*([A-Za-z_]\w*)[ \t]*(?::[^=\n]+)?=[ \t]*(?:await[ \t]+)?([A-Za-z_][\w.]*)\(", re.M
)
_RETURNS = re.compile(r"->\s*(?:(?:t\.|typing\.)?Optional\[)?[\'\"]?([A-Z]\w*)")


def returned_classes(
    text: str, callables: Mapping[str, Sequence[DefinitionLike]], classes: Iterable[str]
) -> list[tuple[str, str, str]]:
    """(variable, class, callee) for ``var = f(...)``, ``var = await Cls.method(...)`` or ``var =
    Cls(...)`` in ``text`` whose callee (looked up by name in ``callables``; a ``Cls.`` qualifier
    must match the method's class) is a class of ``classes`` or is annotated to return one
    (``-> RunResultStreaming``, ``-> X | None``, ``-> Optional[X]``): what ``var.`` will be
    followed by, without type inference. Nearest (last) assignment of each variable first."""
    known = set(classes)
    out: dict[str, tuple[str, str, str]] = {}
    for var, callee in _ASSIGNED_CALL.findall(text):
        parts = callee.split(".")
        owner = parts[-2] if len(parts) > 1 and parts[-2][:1].isupper() else None
        found: set[str] = set()
        for d in callables.get(parts[-1], ()):
            scope = getattr(d, "scope", "")
            if owner is not None and scope.split(".")[-1] != owner:
                continue
            if d.kind == "class":
                found.add(d.name)
            elif m := _RETURNS.search(one_line(d.signature, 400).splitlines()[-1]):
                found.add(m.group(1))
        found &= known
        out.pop(var, None)
        if len(found) == 1:
            out[var] = (var, found.pop(), callee)
    return list(reversed(out.values()))
