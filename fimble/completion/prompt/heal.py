"""A cursor after a line's indentation: the prompt leaves the indentation to the model.

A byte-level BPE tokenizer (Qwen2's) splits ``        return x`` as seven spaces and `` return``:
the last space of an indentation belongs to the word after it. A prompt whose prefix ends in the
cursor's indentation ends in an eight-space token, which the model never saw followed by a word,
and it then has to write ``return`` without its space: a token boundary it was not trained on.
On the 97 indented line starts of the served evaluation's seed-3 cases (full prompt, no repository
context), the model wrote 33 lines exactly so and 42 with the indentation left out (11 won, 2 lost;
``bench/space_before_cursor.py``); llama.vim leaves it out too (it sends a line of only whitespace as
an empty one).

So the prompt's prefix stops at the line's start (``split_indent``), and the generation is held to
begin with exactly the indentation the line has (``HealGuide``: among the model's best tokens, the
best that keeps the text a prefix of the indentation, or goes on past it), which is then taken off
(``unheal``): what the editor shows still starts at the cursor. Where the model would not write the
line at that indentation at all (it wants a blank line, or the line one level out), none of its best
tokens fits and the answer is empty. Stop rules and streamed text see the answer as it will be
shown, after the indentation (``healed_stop``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fimble.completion.engine.config import StopCheck
    from fimble.completion.engine.guide import Guide

__all__ = [
    "INDENT_TOKENS",
    "HealGuide",
    "heal_guide",
    "healed_on_text",
    "healed_stop",
    "split_indent",
    "unheal",
]

# How many of the model's best next tokens the indentation is looked for among: an indentation the
# model agrees with is among its first few; one it does not want at all (a dedent) is far down.
BREADTH = 16
# Tokens an indentation takes to write, given to a generation besides its answer's: Qwen2's tokenizer
# has single tokens for long runs of spaces and tabs, so one or two.
INDENT_TOKENS = 2
_INDENT = re.compile(r"[ \t]+")


def split_indent(prefix: str) -> tuple[str, str]:
    """``(prompt_prefix, indent)``: where the cursor's line holds only indentation before the cursor,
    the prefix without it and that indentation; else ``(prefix, "")``."""
    cut = prefix.rfind("\n") + 1
    line = prefix[cut:]
    if line and _INDENT.fullmatch(line):
        return prefix[:cut], line
    return prefix, ""


def unheal(text: str, indent: str) -> str:
    """The generated ``text`` as shown at the cursor: without the indentation the line already has
    (empty when the generation did not write it)."""
    if not indent:
        return text
    return text[len(indent) :] if text.startswith(indent) else ""


def healed_stop(stop: StopCheck | None, indent: str) -> StopCheck | None:
    """``stop`` applied to the text after ``indent``; a generation that leaves the indentation stops
    there with nothing kept."""
    if not indent:
        return stop
    n = len(indent)

    def check(text: str) -> tuple[str, int] | None:
        if len(text) <= n:
            return None if indent.startswith(text) else ("indent", 0)
        if not text.startswith(indent):
            return ("indent", 0)
        hit = stop(text[n:]) if stop is not None else None
        return None if hit is None else (hit[0], hit[1] + n)

    return check


def healed_on_text(on_text: Callable[[str], None] | None, indent: str) -> Callable[[str], None] | None:
    """``on_text`` shown the text after ``indent`` (nothing while the indentation is written)."""
    if not indent or on_text is None:
        return on_text
    n = len(indent)

    def seen(text: str) -> None:
        if len(text) > n and text.startswith(indent):
            on_text(text[n:])

    return seen


class HealGuide:
    """Holds the first tokens to ``indent``, then leaves the choice to ``inner`` (an import line's
    guide, shown the text after the indentation) or to the model."""

    def __init__(self, indent: str, inner: Guide | None = None) -> None:
        self.indent = indent
        self.inner = inner
        self.breadth = max(BREADTH, inner.breadth if inner is not None else 0)
        self._pieces: Callable[[str], Sequence[str]] | None = None
        self._healed = False  # the indentation is written: the choice is the inner guide's or the model's

    @property
    def pieces(self) -> Callable[[str], Sequence[str]] | None:
        return self._pieces

    @pieces.setter
    def pieces(self, value: Callable[[str], Sequence[str]] | None) -> None:
        self._pieces = value
        if self.inner is not None:
            self.inner.pieces = value

    @property
    def released(self) -> bool:
        """Past the indentation and the inner guide (if any) stepped aside: drafts may resume."""
        return self._healed and (self.inner is None or self.inner.released)

    def pick(self, text: str, ranked: Sequence[tuple[int, str, float]]) -> int:
        n = len(self.indent)
        if len(text) >= n:
            self._healed = True
            if self.inner is not None:
                return self.inner.pick(text[n:], ranked)
            return ranked[0][0] if ranked else 0
        rest = self.indent[len(text) :]
        for tok, piece, _logit in ranked:
            if piece and (rest.startswith(piece) or piece.startswith(rest)):
                return tok
        return ranked[0][0] if ranked else 0  # none fits: the stop check ends it empty

    def fresh(self) -> HealGuide:
        return HealGuide(self.indent, None if self.inner is None else self.inner.fresh())


def heal_guide(indent: str, inner: Guide | None) -> Guide | None:
    """The guide a generation at a cursor with ``indent`` before it decodes with: ``inner`` (an import
    line's, or none) behind a ``HealGuide`` where there is an indentation to write."""
    return HealGuide(indent, inner) if indent else inner
