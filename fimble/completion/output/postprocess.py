"""Cleaning a finished generation before it is shown: pure functions over strings."""

from __future__ import annotations

from fimble.completion.output.stops import StopContext, make_stop_check

__all__ = [
    "clean_completion",
    "finished_lines",
    "fit_line_start",
    "may_reindent",
    "trim_suffix_lines",
    "trim_suffix_overlap",
    "whole_lines",
]

_PAIRS = {")": "(", "]": "[", "}": "{"}


def _excess(line: str) -> int:
    """How unbalanced a line is: closers without an opener, plus unpaired double quotes."""
    stack: list[str] = []
    unmatched = 0
    for ch in line:
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS:
            if stack and stack[-1] == _PAIRS[ch]:
                stack.pop()
            else:
                unmatched += 1
    return unmatched + line.count('"') % 2


def _unclosed(line: str) -> int:
    """Openers left open at the end of ``line`` (closers without an opener are not counted)."""
    depth = 0
    for ch in line:
        if ch in "([{":
            depth += 1
        elif ch in _PAIRS and depth:
            depth -= 1
    return depth


def _own_closers_from(text: str) -> int:
    """Where the last closing bracket that pairs with an opener of ``text`` itself ends (0: none)."""
    stack: list[str] = []
    end = 0
    for i, ch in enumerate(text):
        if ch in "([{":
            stack.append(ch)
        elif ch in _PAIRS and stack and stack[-1] == _PAIRS[ch]:
            stack.pop()
            end = i + 1
    return end


def trim_suffix_overlap(text: str, line_prefix: str, line_suffix: str) -> str:
    """Drop the end of ``text`` that repeats what already follows the cursor on its line.

    ``dates.append(|)`` completed as ``dt.date(y, m, d))`` would leave two closing parentheses once
    the editor inserts it before the existing ``)``. A part of the rest of the line is trimmed only
    when that makes the line better balanced, so a correct ``dt.date(y, m, d)`` keeps its own ``)``;
    all of it (``let n = |;`` completed as ``items.length;``) also when balance stays the same.

    The balance is the cursor's line alone, which cannot see a bracket opened on a line above it
    (``value=|)`` inside a ``compute(`` call): a closer that pairs with an opener of the suggestion
    itself is never trimmed, or ``foo(bar(x))`` there would lose the ``)`` it needs.
    """
    rest = line_suffix.rstrip()
    body = text.rstrip()
    if not rest or not body:
        return text
    own = _own_closers_from(body)  # body[:own] keeps every pair the suggestion closes itself
    before = _excess(line_prefix + body + rest)
    if len(body) > len(rest) and body.endswith(rest) and len(body) - len(rest) >= own:
        trimmed = line_prefix + body[: -len(rest)] + rest
        if _excess(trimmed) <= before and _unclosed(trimmed) <= _unclosed(line_prefix + body + rest):
            return body[: -len(rest)]
    if before == 0:
        return text
    for k in range(min(len(rest), len(body) - own), 0, -1):
        if body.endswith(rest[:k]) and _excess(line_prefix + body[:-k] + rest) < before:
            return body[:-k]
    return text


def trim_suffix_lines(text: str, suffix: str) -> str:
    """Drop the last lines of a multi-line ``text`` that repeat the first lines after the cursor.

    The suffix-repeat stop catches a repeated line once it is complete; a generation cut by the
    token limit may end in the middle of one, or in lines the stop saw only as a whole.
    """
    lines = text.split("\n")
    head = suffix.split("\n", 2 * len(lines) + 2)[1 : 2 * len(lines) + 1]  # not the whole rest of the file
    after = [line.strip() for line in head if line.strip()]
    for k in range(min(len(lines) - 1, len(after)), 0, -1):
        tail = [line.strip() for line in lines[-k:]]
        if all(tail) and tail == after[:k] and any(ch.isalnum() for ch in "".join(tail)):
            return "\n".join(lines[:-k]).rstrip()
    return text


_CONTINUATION = tuple(".,+-*/%&|^?:=<>\\")  # a first line starting so goes on the statement above
_GOES_ON = tuple(".,+-*/%&|^?:=<\\")  # a line ending so goes on (``Map<K, V>`` and ``i++`` end theirs)
_BLOCK_OPENERS = ("{", ":", "=>", "->", " do", " then")
_COMMENTS = ("#", "//", "/*", "* ", "--")
_CONTROL = frozenset({"if", "else", "for", "foreach", "while", "do", "switch"})


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def _code(line: str) -> str:
    """``line`` without a trailing comment, roughly (a ``#`` or ``//`` after a space)."""
    for mark in (" //", " #", "\t//", "\t#"):
        if (at := line.find(mark)) >= 0:
            line = line[:at]
    return line.rstrip()


def _opens_block(line: str, grammar: bool) -> bool:
    """Whether the next line may go one level deeper than ``line``: a header or an opener at its end, a
    control statement without braces (``if (x)``, whose body is the next line), or, in a file without a
    grammar, a rule line (a Makefile's ``app: main.o``, whose recipe is indented)."""
    code = _code(line)
    if code.endswith(_BLOCK_OPENERS):
        return True
    word = code.lstrip("} \t").split("(", 1)[0].split(" ", 1)[0]
    if word in _CONTROL and not code.endswith((";", "}")):
        return True
    return not grammar and bool(code) and not line[0].isspace() and ":" in code


def _continues(line: str, listed: bool) -> bool:
    """Whether ``line`` leaves a statement going (an operator, or a bracket left open, at its end): the
    next line's indentation is then alignment, which nothing here can judge. With the cursor inside a
    bracket (``listed``), a balanced line ending in a comma is an item, the next item its sibling."""
    code = _code(line)
    if code.endswith(_BLOCK_OPENERS):  # ``=>``, ``:`` end a header, not an expression
        return False
    if _unclosed(code) > 0:
        return True
    if code.endswith(("++", "--")) or (listed and code.endswith(",")):
        return False
    return code.endswith(_GOES_ON)


def _shift(lines: list[str], delta: int, add: str) -> list[str]:
    """Move every non-blank line ``delta`` characters: ``add`` in front, or that much whitespace off."""
    if delta > 0:
        return [add + line if line.strip() else line for line in lines]
    return [line[-delta:] if not line[:-delta].strip() else line for line in lines]


def _room(ctx: StopContext, body: str, unit: str) -> tuple[int, int]:
    """How deep (in characters) the first line at the cursor may start: (at least, at most).

    The lines around say it. At most as deep as the line's own whitespace, the line above (a level more
    when that opens a block, a level less for a closing bracket after a statement) or the line below
    (a level less when the first line opens a block or goes on: the line below is then its body or its
    continuation). At least as deep as both the lines around when they are statements of one block
    (``y = 1`` at column 0 between two indented lines), a level deeper than a closing bracket below, a
    level less than the body below a first line that opens a block (``except:`` and ``def g():`` dedent
    to it), when the file says what a level is. A comment or a closing bracket may go anywhere
    shallower, and so may the first line when the line below goes on something (``.map(...)``).
    """
    above, below, known = ctx.line_above, ctx.line_below, ctx.indent_unit
    grammar = ctx.open_brackets is not None
    upper, lower = len(_leading(above)), len(_leading(below))
    closer, comment = body[0] in ")]}", body.startswith(_COMMENTS)
    # A header, or a line that goes on: the line below is its body or its continuation.
    header = not comment and (_opens_block(body, grammar) or _continues(body, bool(ctx.open_brackets)))
    opens = bool(above) and _opens_block(above, grammar)
    base = upper + (len(unit) if opens and not closer else 0)
    top = base - (len(unit) if closer and above and not opens else 0)
    own = ctx.line_prefix + ctx.suffix.split("\n", 1)[0].rstrip("\r")
    high = max(len(own), top, lower - (len(unit) if header and below else 0))
    low = 0
    if above and below and not closer and not comment and not below.lstrip().startswith(_CONTINUATION):
        if header:
            low = min(base, lower - len(known)) if known else 0
        elif below.lstrip()[0] in ")]}":
            low = min(base, lower + len(known)) if known else 0
        else:
            low = min(base, lower)
    return max(low, 0), high


def may_reindent(ctx: StopContext) -> bool:
    """Whether ``fit_line_start`` may move the first line at this cursor: it sits in the leading
    whitespace of a blank line, outside strings and comments."""
    return not ctx.prose and not ctx.line_prefix.strip() and not ctx.suffix.split("\n", 1)[0].strip()


def fit_line_start(text: str, ctx: StopContext) -> str:
    r"""Indent the first line of a suggestion asked for in the leading whitespace of a blank line for
    where the line's code goes, not merely for where the cursor is.

    Inserted at the cursor, the first line lands after the whitespace before the cursor, and the
    whitespace after it stays after the suggestion. The model does not always count it that way: after
    a prompt ending in tabs it may write one tab more than the cursor has (``\t\t|`` completed as
    ``\tconfig[k] = v;``: three tabs), or restate the whole indentation, and with the cursor in the
    middle of the indentation, or at column 0 of an empty line in a block, it may write none (``y = 1``
    at column 2). The first line is moved into the room the lines around leave (``_room``); the
    whitespace before the cursor cannot be taken back. The next lines follow the first when the model
    wrote them relative to where it put the first (a block one level too deep throughout); when they
    already sit where the moved first line wants them (the usual case: only the first line restated
    the indentation), they stay. Nothing moves after a line that goes on a statement (its continuation
    is alignment) or before one that continues one (``.map(...)``).
    """
    lp = ctx.line_prefix
    if not may_reindent(ctx) or not text or text[0] == "\n":
        return text
    first, newline, later = text.partition("\n")
    lead = _leading(first)
    body = first[len(lead) :]
    above, below = ctx.line_above, ctx.line_below
    if not body or (body.startswith(_CONTINUATION) and not body.startswith(_COMMENTS)):
        return text
    if _continues(above, bool(ctx.open_brackets)):
        return text
    unit = ctx.indent_unit or ("\t" if "\t" in lp + lead + _leading(above) + _leading(below) else "    ")
    low, high = _room(ctx, body, unit)
    width = len(lp) + len(lead)
    target = max(min(max(width, low), high), len(lp))
    if target == width or low > high:
        return text
    own = lp + ctx.suffix.split("\n", 1)[0].rstrip("\r")
    upper = _leading(above)
    for ws in (own, _leading(below), upper, upper + unit, lp):  # the file's own whitespace for it
        if len(ws) == target and ws.startswith(lp):
            new_lead = ws[len(lp) :]
            break
    else:
        if target > width:
            return text
        new_lead = lead[: target - len(lp)]
    lines = later.split("\n") if newline else []
    second = next((line for line in lines if line.strip()), None)
    if second is not None:
        step = len(unit) if _opens_block(first, ctx.open_brackets is not None) else 0
        placed = len(_leading(second))
        if abs(placed - (width + step)) < abs(placed - (target + step)):  # written relative to the first
            added = new_lead[len(lead) :] if new_lead.startswith(lead) else unit
            lines = _shift(lines, target - width, added)
    return "\n".join([new_lead + body, *lines])


def clean_completion(text: str, ctx: StopContext) -> str:
    r"""Trailing whitespace off, and no overlap with the suffix: for a one-line suggestion with the rest
    of the cursor's line, for a block with the lines that follow it.

    The stop rules judge a line once it is complete; a generation that ended (end of generation, token
    limit) in the middle of its last line has that line judged here, as if a newline followed.
    The lines are cleaned with ``\n`` and given the document's line end last: a model writes ``\n`` or
    ``\r\n`` in a CRLF file, and the suggestion must read like the file. A suggestion that starts in the
    leading whitespace of a line is indented for the line (``fit_line_start``).
    """
    text = text.replace("\r\n", "\n").rstrip()
    if text and (hit := make_stop_check(ctx)(text + "\n")) is not None:
        text = text[: hit[1]].rstrip()
    if "\n" not in text:
        text = trim_suffix_overlap(text, ctx.line_prefix, ctx.suffix.split("\n", 1)[0])
    else:
        text = trim_suffix_lines(text, ctx.suffix)
    text = fit_line_start(text, ctx)
    return text.replace("\n", ctx.newline) if ctx.newline != "\n" else text


def finished_lines(clean: str, raw: str) -> str:
    """The lines of ``clean`` (the cleaned-up ``raw``) that the generation finished, for a
    generation stopped mid-way (a deadline). Which lines are whole is read from ``raw``: cleaning
    strips the newline that ended the last one, so ``whole_lines`` of the clean text dropped a
    finished first line (as served on a 2-core Xeon, 6 of 60 automatic line starts in blocks showed
    nothing at the 4 s deadline although their first line was written)."""
    if not raw[raw.rfind("\n") + 1 :].strip():  # the raw text ends at a line end: all are whole
        return clean
    ended = raw.count("\n")  # lines the newline of which was generated
    lines = clean.split("\n")
    return "\n".join(lines[:ended]).rstrip() if len(lines) > ended else clean


def whole_lines(text: str) -> str:
    """The complete lines of a cut-off multi-line suggestion (nothing if the first is unfinished)."""
    cut = text.rfind("\n")
    return text[:cut].rstrip() if cut > 0 and text[:cut].strip() else ""
