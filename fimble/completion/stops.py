"""Stop rules checked on the decoded text after every generated token.

Stopping while decoding (not trimming afterwards) is what keeps a CPU completion cheap: every token
not generated saves ~40 ms. Each rule is a pure function of the text so far and the document around
the cursor, returning ``(reason, keep)`` — stop, keeping ``text[:keep]`` — or ``None`` to go on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["StopContext", "first_line_stop", "indent_stop", "make_stop_check", "suffix_repeat_stop"]

Rule = Callable[[str, "StopContext"], "tuple[str, int] | None"]


@dataclass(frozen=True)
class StopContext:
    """What the rules know about the cursor's surroundings."""

    line_prefix: str  # text of the cursor's line before the cursor
    suffix: str  # document text after the cursor
    multiline: bool

    @property
    def suffix_first_line(self) -> str:
        """The first non-blank line after the cursor's line, stripped (what the model must not repeat)."""
        _, _, after = self.suffix.partition("\n")
        for line in after.splitlines():
            if line.strip():
                return line.strip()
        return ""

    @property
    def indent(self) -> int:
        """Indentation of the cursor's line."""
        return len(self.line_prefix) - len(self.line_prefix.lstrip(" \t"))


def first_line_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Single-line mode: stop at the newline ending the first line that has content.

    A suggestion at the end of a line may start on the next line (Copilot shows it the same way), so
    leading newlines do not stop it; the first newline after real content does.
    """
    if ctx.multiline:
        return None
    stripped = text.lstrip("\r\n")
    cut = stripped.find("\n")
    if cut < 0:
        return None
    keep = len(text) - len(stripped) + cut
    return "newline", keep


def suffix_repeat_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Stop when a completed generated line repeats the first non-blank line of the suffix.

    The model has reached the code that already follows the cursor; going on would duplicate it.
    """
    target = ctx.suffix_first_line
    if not target or "\n" not in text:
        return None
    lines = text.split("\n")
    offset = 0
    for line in lines[:-1]:  # only complete lines
        if offset > 0 and line.strip() == target:
            return "stop_rule:suffix_repeat", max(0, offset - 1)
        offset += len(line) + 1
    return None


def indent_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Multi-line mode: stop when a new non-blank line is indented less than the cursor's block.

    Such a line belongs to an enclosing block; it is the user's next decision, not this completion.
    """
    if not ctx.multiline or "\n" not in text:
        return None
    first, *rest = text.split("\n")
    offset = len(first) + 1
    for line in rest[:-1]:  # a line is judged once it is complete
        if line.strip():
            indent = len(line) - len(line.lstrip(" \t"))
            if indent < ctx.indent:
                return "stop_rule:indent", offset - 1
        offset += len(line) + 1
    return None


_RULES: tuple[Rule, ...] = (first_line_stop, suffix_repeat_stop, indent_stop)


def make_stop_check(
    ctx: StopContext, rules: tuple[Rule, ...] = _RULES
) -> Callable[[str], tuple[str, int] | None]:
    """Bind the rules to one request's context; the engine calls the result after each token."""

    def check(text: str) -> tuple[str, int] | None:
        for rule in rules:
            hit = rule(text, ctx)
            if hit is not None:
                return hit
        return None

    return check
