"""Stop rules checked on the decoded text after every generated token.

Stopping while decoding (not trimming afterwards) is what keeps a CPU completion cheap: every token
not generated saves ~40 ms. Each rule is a pure function of the text so far and the document around
the cursor, returning ``(reason, keep)`` — stop, keeping ``text[:keep]`` — or ``None`` to go on.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

__all__ = [
    "StopContext",
    "bracket_stop",
    "first_line_stop",
    "indent_stop",
    "make_stop_check",
    "quote_stop",
    "repetition_stop",
    "suffix_repeat_stop",
]

Rule = Callable[[str, "StopContext"], "tuple[str, int] | None"]


@dataclass(frozen=True)
class StopContext:
    """What the rules know about the cursor's surroundings."""

    line_prefix: str  # text of the cursor's line before the cursor
    suffix: str  # document text after the cursor
    multiline: bool
    # From the syntax at the cursor (``fimble.completion.output.shape``); the defaults turn the rules off.
    open_brackets: str | None = None  # brackets open at the cursor, outermost first; None: unknown
    closed_in_suffix: int = 0  # how many of them, innermost first, the suffix closes
    string_quote: str = ""  # closing delimiter of the string the cursor is in, already in the suffix
    block_indent: int | None = None  # lines indented less leave the cursor's block (None: its line's)
    above: str = ""  # whole lines before the cursor's line (the last few), with their line ends
    prose: bool = False  # the cursor is in a string or a comment

    @functools.cached_property
    def suffix_first_line(self) -> str:
        """The first non-blank line after the cursor's line, stripped (what the model must not repeat).

        Cached: the rules ask after every token, and the suffix is the whole rest of the document.
        """
        return self.line_below.strip()

    @functools.cached_property
    def line_below(self) -> str:
        """The first non-blank line after the cursor's line, as written (without its line end)."""
        start = self.suffix.find("\n") + 1
        while 0 < start < len(self.suffix):
            end = self.suffix.find("\n", start)
            line = self.suffix[start : end if end >= 0 else len(self.suffix)].rstrip("\r")
            if line.strip():
                return line
            start = end + 1 if end >= 0 else 0
        return ""

    @functools.cached_property
    def line_above(self) -> str:
        """The last non-blank line before the cursor's line, as written (without its line end)."""
        for line in reversed(self.above.split("\n")):
            if line.strip():
                return line.rstrip("\r")
        return ""

    @functools.cached_property
    def indent_unit(self) -> str:
        """One level of the file's indentation, read from the lines above: a tab, the step most often
        seen from a line ending in ``:`` or ``{`` to the next (a header to its body; continuation and
        docstring lines step anyhow), or "" when they do not say."""
        tabs = spaces = 0
        steps: dict[int, int] = {}
        last, opened = 0, False
        for line in self.above.split("\n"):
            body = line.strip(" \t\r")
            if not body or body.startswith(("*", "/*", "//", "#")):  # comments indent as they like
                continue
            width = len(line) - len(line.lstrip(" \t"))
            tabs += line.startswith("\t")
            spaces += line.startswith(" ")
            if opened and width > last and not line.startswith("\t"):
                steps[width - last] = steps.get(width - last, 0) + 1
            last, opened = width, body.endswith((":", "{"))
        if tabs and tabs >= spaces:
            return "\t"
        return " " * max(steps, key=lambda n: (steps[n], -n)) if steps else ""

    @functools.cached_property
    def newline(self) -> str:
        """The document's line end, the one a suggestion's lines get: CRLF when the cursor's line (or, on
        a last line, the line above) ends with it."""
        end, text = self.suffix.find("\n"), self.suffix
        if end < 0:
            end, text = self.above.rfind("\n"), self.above
        return "\r\n" if end > 0 and text[end - 1] == "\r" else "\n"

    @property
    def min_indent(self) -> int:
        """Generated lines indented less than this belong to an enclosing block."""
        return self.block_indent if self.block_indent is not None else self.indent

    @property
    def indent(self) -> int:
        """Indentation of the cursor's line."""
        return len(self.line_prefix) - len(self.line_prefix.lstrip(" \t"))


def first_line_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Single-line mode: stop at the newline ending the first line that has content.

    A suggestion at the end of a line may start on the next line (Copilot shows it the same way), so
    leading newlines do not stop it; the first newline after real content does — unless the line
    leaves a bracket of its own open (``result = await Runner.run(`` followed by one argument per
    line): one statement is then the suggestion, through the line that closes the bracket (at most
    ``_STATEMENT_MAX_LINES`` lines), rather than a line ending in a dangling ``(``.
    """
    if ctx.multiline:
        return None
    stripped = text.lstrip("\r\n")
    lead = len(text) - len(stripped)
    first = stripped.find("\n")
    if first < 0:
        return None
    depth, depths = 0, {}  # newline index -> brackets the suggestion opened and left open before it
    comment = False  # after "# " or "//" up to the end of the line: brackets there are prose
    # Brackets closed at the start of a line and reopened on it (``} else {``) continue a block
    # that the code below already closes: the line is a whole statement, not one left open.
    leading, reopens = not ctx.line_prefix.strip(), []
    for i, ch in _code_chars(stripped):
        if ch == "\n":
            depths[i], comment = depth, False
            leading, reopens = True, []
        elif comment:
            continue
        elif stripped.startswith(("# ", "//"), i):
            comment = True
        elif ch in _OPENERS:
            leading = False
            if _OPENERS[ch] in reopens:
                reopens.remove(_OPENERS[ch])
            else:
                depth += 1
        elif ch in _CLOSERS:
            if depth == 0 and leading:
                reopens.append(ch)
            depth = max(0, depth - 1)  # closing one the cursor's line opened is the bracket rule's
        elif not ch.isspace():
            leading = False
    cut, lines = first, 1
    while depths.get(cut, 0) > 0 and lines < _STATEMENT_MAX_LINES:
        nxt = stripped.find("\n", cut + 1)
        if nxt < 0:
            return None  # the statement is still open: go on
        cut, lines = nxt, lines + 1
    if lines >= _STATEMENT_MAX_LINES and depths.get(cut, 0) > 0:
        cut = first  # a runaway: keep the old one-line answer
    return "newline", lead + cut


_STATEMENT_MAX_LINES = 12


def suffix_repeat_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Stop when a completed generated line repeats the first non-blank line of the suffix.

    The model has reached the code that already follows the cursor; going on would duplicate it.
    """
    target = ctx.suffix_first_line
    # A line of closing brackets (``}``) also ends every inner block; the bracket rule judges those.
    if not any(ch.isalnum() for ch in target) or "\n" not in text:
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
    At the end of a block header (``def f():``) the block is the body, so a line back at the header's
    indentation leaves it too. A line that starts with a closing bracket is left to the bracket rule:
    it may close the block the suggestion opened. A line of a CRLF generation ends in ``\r``: a blank one
    is still blank.
    """
    if not ctx.multiline or "\n" not in text:
        return None
    first, *rest = text.split("\n")
    offset = len(first) + 1
    limit = ctx.min_indent
    for line in rest[:-1]:  # a line is judged once it is complete
        body = line.lstrip(" \t")
        if body.rstrip("\r") and body[0] not in _CLOSERS and len(line) - len(body) < limit:
            return "stop_rule:indent", offset - 1
        offset += len(line) + 1
    return None


_CLOSERS = ")]}"
_OPENERS = {"(": ")", "[": "]", "{": "}"}


def _code_chars(text: str):  # type: ignore[no-untyped-def]
    """(index, char) of the characters of generated code outside string literals.

    A rough scanner for text the model writes (no grammar runs per token): quotes open and close
    literals, a backslash escapes, and a newline ends an unterminated one-quote literal. That newline
    is yielded: it still ends a line for the rules, and it is most often an apostrophe in a comment
    (``// that's all`` right before ``} else {`` had the ``}`` cut as if mid-line).
    """
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
            elif ch == "\n" and quote != "`":
                quote = ""
                yield i, ch
            continue
        if ch in "\"'`":
            quote = ch
            continue
        yield i, ch


def bracket_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Stop before a closing bracket the text after the cursor already supplies.

    With ``n`` brackets open at the cursor, of which the suffix closes ``m`` (innermost first), the
    suggestion may close at most ``n - m`` of them itself; the next one would be a duplicate of the
    suffix's (``dates.append(|)`` completed as ``dt.date(y, m, d))``) or close something outside the
    code in view. Checked per token, so the model stops there instead of writing on past it.

    Closing brackets that begin a line and are reopened on it (``} catch (error) {``, ``} else {``,
    ``}, {``) close one block and open the next, which the suffix's bracket then closes: such a line
    is judged once it is complete, and passes when it leaves as many brackets open as it closed
    beyond the allowance (rxjs's ``} catch (error) {`` was served empty, at line start).
    """
    if ctx.open_brackets is None:
        return None
    allowed = len(ctx.open_brackets) - ctx.closed_in_suffix
    stack: list[str] = []
    unmatched = 0
    leading = not ctx.line_prefix.strip()  # only whitespace and closers so far on this line
    pending: list[int] = []  # excess closers leading this line, waiting for it to reopen them
    base = 0  # the stack's depth when they came
    for i, ch in _code_chars(text):
        if ch == "\n":
            if pending:
                if len(stack) - base < len(pending):
                    return "stop_rule:bracket_balance", pending[0]
                unmatched -= len(pending)  # the reopened brackets stand for the closed ones
                del stack[base : base + len(pending)]
                pending = []
            leading = True
            continue
        if ch in _OPENERS:
            stack.append(_OPENERS[ch])
        elif ch in _CLOSERS:
            if stack and stack[-1] == ch:
                stack.pop()
            else:  # a closer keeps the line's start: ``})`` may be reopened as well
                unmatched += 1
                if unmatched > allowed:
                    if not leading:
                        return "stop_rule:bracket_balance", i
                    pending.append(i)
                    base = len(stack)
            continue
        if not ch.isspace():
            leading = False
    return None


def quote_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Inside a string whose closing quote already follows the cursor: stop at the model's own.

    ``print("|")`` completed as ``hello")`` would leave ``hello")")``.
    """
    quote = ctx.string_quote
    if not quote:
        return None
    at = 0
    while (at := text.find(quote, at)) >= 0:
        backslashes = len(text[:at]) - len(text[:at].rstrip("\\"))
        if backslashes % 2 == 0:
            return "stop_rule:quote_balance", at
        at += len(quote)
    return None


_LOOP_MIN_CHARS = 40  # a character loop must cover this much of the line…
_LOOP_MIN_REPEATS = 4  # …with its unit repeated this often (a row of zeros is code, a long one a loop)
_LOOP_MAX_UNIT = 32


def _line_loop(text: str) -> int | None:
    """Where to cut a run of repeated complete lines: after the first copy of the repeated unit.

    One line three times in a row, or a unit of 2-4 lines twice, counting non-blank lines only.
    """
    lines: list[tuple[str, int]] = []  # (stripped, end offset) of complete non-blank lines
    offset = 0
    for line in text.split("\n")[:-1]:
        offset += len(line) + 1
        if line.strip():
            lines.append((line.strip(), offset - 1))
    n = len(lines)
    if n >= 3 and lines[-1][0] == lines[-2][0] == lines[-3][0] and any(c.isalnum() for c in lines[-1][0]):
        return lines[-3][1]
    for p in range(2, 5):
        if n < 2 * p:
            break
        unit = [s for s, _ in lines[n - p :]]
        letters = sum(c.isalnum() for s in unit for c in s)
        if letters >= 8 and unit == [s for s, _ in lines[n - 2 * p : n - p]]:
            return lines[n - p - 1][1]
    return None


def _char_loop(text: str) -> int | None:
    """Where to cut a loop within the last line (``a.b.b.b.b.b…``): after the unit's first copy."""
    line_start = text.rfind("\n") + 1
    line = text[line_start:]
    if len(line) < _LOOP_MIN_CHARS:
        return None
    for unit in range(1, _LOOP_MAX_UNIT + 1):
        run = 0
        while run + unit < len(line) and line[-1 - run] == line[-1 - run - unit]:
            run += 1
        covered = run + unit
        if covered >= _LOOP_MIN_CHARS and covered >= _LOOP_MIN_REPEATS * unit:
            loop_start = len(line) - covered
            return line_start + loop_start + unit
    return None


def repetition_stop(text: str, ctx: StopContext) -> tuple[str, int] | None:
    """Stop a model caught in a loop (the same line or lines again and again, or a phrase repeated
    along one line), keeping the first copy: greedy decoding on a small model does this, and every
    further token costs time and is deleted by the user anyway."""
    cut = _line_loop(text) if "\n" in text else None
    if cut is None:
        cut = _char_loop(text)
    return None if cut is None else ("stop_rule:repetition", cut)


_RULES: tuple[Rule, ...] = (
    first_line_stop,
    quote_stop,
    bracket_stop,
    suffix_repeat_stop,
    indent_stop,
    repetition_stop,
)


def make_stop_check(
    ctx: StopContext, rules: tuple[Rule, ...] = _RULES
) -> Callable[[str], tuple[str, int] | None]:
    """Bind the rules to one request's context; the engine calls the result after each token.

    One token may trip several rules (``")\n`` ends a string and a line); the earliest cut wins, and
    among equal cuts the rule listed first.
    """

    def check(text: str) -> tuple[str, int] | None:
        best: tuple[str, int] | None = None
        for rule in rules:
            hit = rule(text, ctx)
            if hit is not None and (best is None or hit[1] < best[1]):
                best = hit
        return best

    return check
