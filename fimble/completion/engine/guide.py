"""Guided decoding: keep an import line to statements that can work, and let the model choose.

The engine asks a guide for each token, showing it the model's best few tokens with their logits;
``ImportGuide`` takes the best one that keeps the line a prefix of one of ``ImportChoices``'
statements. Whether the line is an import at all is the model's call: until it reads ``from `` or
``import ``, the guide only follows (an empty line among the imports may be ``try:``, ``__all__ =``
or ``log = ...``). Then it steps aside for good, and the model writes what it likes, when none of
those tokens fits or when the model prefers another token by more than ``margin`` (natural-log
odds): an import of a package the workspace does not have, say. So a guided line is either one the
model found plausible among those that work, or the model's own. Past the line's end the guide has
nothing to say.

Inside a parenthesised ``from M import (`` list (openai-agents writes most of its imports so), a
line is names of M, each followed by a comma: the guide keeps it to the missing names M can give.
The line that opens such a list, ``from M import (``, is a whole statement's first line where the
lines below hold its names (``list_below``): elsewhere the model's ``(`` is held as before, or it
would open a list that nothing closes (requests' adapters.py, ``from .auth import (``).

A name may be bound under another: ``SSLError as RequestsSSLError`` (requests' models.py),
``jsonify as jsonify`` (flask's re-exports), ``import pkg.mod as mod``, ``{ a as b }``. The guide
holds the name to the choices and leaves the alias, any identifier, to the model: before, a guided
line could not write `` as`` at all, so it ended at the name, or named the next one instead.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Sequence
from typing import Protocol

from fimble.completion.context.imports import ImportChoices, open_list

__all__ = ["Guide", "ImportGuide", "JsImportGuide", "import_guide"]

# How much less likely (natural log of odds, ~e^-5 = 0.7%) a token that keeps the import workable
# may be than the model's own choice and still be taken instead.
MARGIN = 5.0
# A barrel's re-export: what the model prefers outside the choices is almost always a row the file
# already has (a duplicate export, a compile error) or a module that does not exist, so the guide
# holds the line against a far stronger preference (rxjs's index.ts: ``pipe``, re-exported further
# down, over the missing ``pairs``).
EXPORT_MARGIN = 12.0
# How many of the model's best next tokens a guide chooses among. A JavaScript or TypeScript guide
# looks much further: the module a barrel lacks is one the model has no reason to expect (``pairs``
# came after 24 names of modules rxjs's index.ts already re-exports), and an ES import names its
# module after the names, a path the model often ranks low (rxjs, ceiling: 11 -> 12 of 20, one
# import line won, none lost). Python keeps 24, the breadth its guide was measured with.
BREADTH = 24
JS_BREADTH = 1024
_NAMES_SEP = re.compile(r",\s*")
# The lines below the cursor's line continue a parenthesised import list: an indented name (maybe
# aliased) and its comma.
_LIST_BELOW = re.compile(r"[ \t]+[A-Za-z_]\w*(?:[ \t]+as[ \t]+\w+)?[ \t]*,")
# A listed name bound under an alias, whole (``a as b``), or as it is being written (``a``, ``a a``,
# ``a as``, ``a as b``: the name, then what has been written of its alias clause).
_ALIASED = re.compile(r"([A-Za-z_$][\w$]*)(?: as [A-Za-z_$][\w$]*)?")
_ALIASING = re.compile(r"([A-Za-z_$][\w$]*)?( (?:a(?:s(?: (?:[A-Za-z_$][\w$]*)?)?)?)?)?")
# The module path after an ES statement's names: (quote, the path so far, the closing quote if any).
_SPEC_SO_FAR = re.compile(r"""\}\s*from\s*(['"])([^'"\n]*)(['"]?)""")
# What may follow a module's specifier and still name it: ESM's written extensions, an index.
_ENDINGS = ("", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", "/index", "/index.js")
# A run of letters: the words a byte-level BPE tokenizer (Qwen2's, Llama 3's) splits text into
# before merging, each with at most one other character in front (`` pairs``, ``/pairs``).
_LETTERS = re.compile(r"[^\W\d_]+")


class Guide(Protocol):
    released: bool  # stepped aside: the model chose freely from then on
    breadth: int  # how many of the model's best next tokens ``pick`` is shown
    # How the model's tokenizer splits a text into pieces; the engine sets it before the first pick.
    pieces: Callable[[str], Sequence[str]] | None

    def pick(self, text: str, ranked: Sequence[tuple[int, str, float]]) -> int:
        """The next token after the generated ``text``, given the model's best (token, piece,
        logit), best first; an empty piece is an end-of-generation or control token."""
        ...

    def fresh(self) -> Guide:
        """The guide as before its first pick, for a generation that starts again."""
        ...


class ImportGuide:
    """Keeps ``typed + generated`` (the line without its indentation) a prefix of a statement in
    ``choices``; see the module docstring."""

    def __init__(
        self,
        choices: ImportChoices,
        typed: str = "",
        margin: float = MARGIN,
        within: str | None = None,
        list_below: bool = False,
    ) -> None:
        self.choices = choices
        self.typed = typed
        self.margin = margin
        self.within = within  # the module of the open ``from M import (`` list the line is in
        self.list_below = list_below  # the lines below are an open list's names: the line may open it
        self.released = False
        self.held = False  # kept to the choices against the model once: kept so to the line's end
        self.breadth = JS_BREADTH if choices.language == "js" else BREADTH
        self.pieces: Callable[[str], Sequence[str]] | None = None
        self._words: frozenset[str] | None = None
        self._splits: dict[str, frozenset[int]] = {}

    def _names_fit(self, names: tuple[str, ...], listed: str, *, whole: bool) -> bool:
        """``listed`` ("a, b as c, d") names distinct entries of ``names``, each maybe under an
        alias of the model's (an entry ``x as y`` keeps its own); the last one (or its alias) may be
        unfinished unless ``whole``."""
        *listed_done, last = _NAMES_SEP.split(listed)
        done = [_entry(names, n) for n in listed_done]
        if None in done or len(set(done)) != len(done):
            return False
        if whole:
            entry = _entry(names, last)
            return entry is not None and entry not in done
        if any(n.startswith(last) for n in names if n not in done):
            return True
        m = _ALIASING.fullmatch(last)  # a name whole, its alias clause being written
        return m is not None and m.group(2) is not None and m.group(1) in names and m.group(1) not in done

    def _after_import(self, names: tuple[str, ...], rest: str, *, whole: bool) -> bool:
        """``rest`` (what follows ``from M import ``) binds names of M: bare, or in parentheses.
        Only where the lines below are the list's names (``list_below``) may the line open one: a
        bare ``(`` is then whole (requests' tests: before, the guide held ``from requests.compat
        import (`` to one of the names instead)."""
        if not rest.startswith("(") or not self.list_below:
            return self._names_fit(names, rest, whole=whole)
        inner = rest[1:].strip()
        if not inner:
            return True
        if inner.endswith((")", ",")):  # closed, or continued on the lines below
            listed = inner.removesuffix(")").rstrip().removesuffix(",").rstrip()
            return bool(listed) and self._names_fit(names, listed, whole=True)
        return not whole and self._names_fit(names, rest[1:].lstrip(), whole=False)

    def viable(self, line: str) -> bool:
        """``line`` can still become one of the statements (a finished one counts)."""
        if self.within is not None:
            names = self.choices.modules.get(self.within, ())
            return self._names_fit(names, line, whole=False)
        for module, names in self.choices.modules.items():
            head = f"from {module} import "
            if head.startswith(line):
                return True
            if line.startswith(head) and self._after_import(names, line[len(head) :], whole=False):
                return True
        return any(
            f"import {x}".startswith(line) or _aliasing(line, f"import {x}", whole=False)
            for x in self.choices.plain
        )

    def finished(self, line: str) -> bool:
        """``line`` is a whole statement of the choices (in a list: names, a comma after the last
        or not)."""
        if self.within is not None:
            names = self.choices.modules.get(self.within, ())
            return self._names_fit(names, line.removesuffix(","), whole=True)
        for module, names in self.choices.modules.items():
            head = f"from {module} import "
            if line.startswith(head) and self._after_import(names, line[len(head) :], whole=True):
                return True
        return any(
            line == f"import {x}" or _aliasing(line, f"import {x}", whole=True) for x in self.choices.plain
        )

    def committed(self, line: str) -> bool:
        """The model has started an import statement: from here on the guide holds it to one."""
        return self.within is not None or line.startswith(("from ", "import "))

    def fresh(self) -> ImportGuide:
        """This guide as before its first pick. A guide keeps what it decided during one generation
        (``released``, ``held``); a generation that starts again (a batch job stopped by a keystroke
        and requeued) must start from a fresh one or it would not be the answer given alone."""
        again = copy.copy(self)
        again.released = again.held = False
        return again

    def _fits(self, line: str, piece: str) -> bool:
        if not piece:  # the end: only after a whole statement
            return self.finished(line)
        if "\n" in piece:
            head = piece[: piece.index("\n")]
            return self.finished((line + head).rstrip())
        return self.viable(line + piece)

    def pick(self, text: str, ranked: Sequence[tuple[int, str, float]]) -> int:
        if self.released or "\n" in text or not ranked:
            return ranked[0][0] if ranked else 0
        line = self.typed + text
        top = ranked[0]
        committed = self.committed(line)
        if not committed and not self._fits(line, top[1]):
            self.released = True  # the model is not writing an import: not ours to say it should
            return top[0]
        fitting = ((tok, piece, logit) for tok, piece, logit in ranked if self._fits(line, piece))
        best = first = next(fitting, None)
        if first is not None and not self._whole_split(line + first[1]):
            best = next((f for f in fitting if self._whole_split(line + f[1])), first)
        if best is not None:
            tok, _, logit = best
            if tok != top[0] and not self.held and self._holds(line + top[1]):
                self.held = True
            if self.held or top[2] - logit <= self.margin:
                return tok
        self.released = True
        return top[0]

    def _whole_split(self, text: str) -> bool:
        """``text`` ends where the tokenizer would end a piece of the statement it starts: at the
        end of a word, or where the tokenizer splits the word the choices finish it with.

        Elsewhere the model's token stands for another word: ``operator`` of rxjs's ``operators``
        (one token, `` operators``) is the model's ``operator`` or ``OperatorFunction``, and after
        it the ``s`` that ``operators`` needs is not among its best 1024 tokens, so the guide
        could only step aside (and the model wrote ``'./internal/observable/operator'``, a module
        that does not exist). Without ``pieces`` (no tokenizer to ask) every end counts."""
        if self.pieces is None or not text or not text[-1].isalpha():
            return True
        start = len(text)
        while start > 0 and text[start - 1].isalpha():
            start -= 1
        if text[:start].endswith(" as "):
            return True  # an alias: the model's own word, no choice's
        run = text[start:]
        before = text[start - 1 : start]
        lead = "" if before in ("\r", "\n") or before.isdigit() else before
        for word in self._choice_words():
            if word == run:
                return True
            if word.startswith(run) and len(lead) + len(run) in self._split_ends(lead + word):
                return True
        return False

    def _choice_words(self) -> frozenset[str]:
        """The runs of letters of every statement the choices could make."""
        if self._words is None:
            c = self.choices
            texts = [*c.plain, *c.modules, *(n for ns in c.modules.values() for n in ns), "from import as"]
            if c.language == "js":
                texts += [c.js_head(), c.js_head(type_only=True), *(c.js_tail(m) for m in c.modules)]
            self._words = frozenset(w for t in texts for w in _LETTERS.findall(t))
        return self._words

    def _split_ends(self, text: str) -> frozenset[int]:
        """Where the tokenizer's pieces of ``text`` end (character offsets)."""
        ends = self._splits.get(text)
        if ends is None:
            assert self.pieces is not None
            at, found = 0, set()
            for piece in self.pieces(text):
                at += len(piece)
                found.add(at)
            ends = self._splits[text] = frozenset(found)
        return ends

    def _holds(self, text: str) -> bool:
        """``text`` (the line with the model's own next piece) cannot work whatever the model's
        preference: the guide keeps to its choices then, past any margin, and for the rest of the
        line (``held``): a line begun against the model's will and then left to it ends as neither
        (rxjs's barrel: held off ``throwError``, exported already, the model took ``operator`` of the
        choices' ``operators``, then, released, wrote a module that does not exist)."""
        return False


class JsImportGuide(ImportGuide):
    """The same for JavaScript and TypeScript: ``import { a, b } from './m';`` (or ``import type``),
    names first, in the file's style (see ``ImportChoices``), and a barrel file's ``export { a }
    from './m';`` re-exports; no open lists."""

    def _split(self, line: str) -> tuple[str, str] | None:
        """(what follows the statement's head, the head) of a line past the head, None before it."""
        for head in (self.choices.js_head(), self.choices.js_head(type_only=True)):
            if line.startswith(head):
                return line[len(head) :], head
        return None

    def viable(self, line: str) -> bool:
        heads = (self.choices.js_head(), self.choices.js_head(type_only=True))
        if any(head.startswith(line) for head in heads):
            return True
        split = self._split(line)
        if split is None:
            return False
        rest = split[0]
        if "}" not in rest:
            listed = rest.rstrip() if self.choices.spaced else rest
            whole = listed != rest and bool(listed) and not listed.endswith(",")  # ``a }`` comes next
            if listed.endswith(","):
                listed = rest
            return any(
                self._names_fit(ns, listed, whole=whole) or (whole and self._names_fit(ns, rest, whole=False))
                for ns in self.choices.modules.values()
            )  # ``a `` is a whole name, or one whose alias clause comes next
        listed, _, _ = rest.partition("}")
        tail = rest[len(listed) :]
        listed = listed.rstrip()
        for module, ns in self.choices.modules.items():
            full = self.choices.js_tail(module)
            if self.choices.spaced:
                full = full[1:]  # the space before the brace went with the names
            if self._names_fit(ns, listed, whole=True) and full.startswith(tail):
                return True
        return False

    def finished(self, line: str) -> bool:
        split = self._split(line)
        if split is None or "}" not in split[0]:
            return False
        rest, head = split
        listed = rest[: rest.index("}")].rstrip()
        for module, ns in self.choices.modules.items():
            full = head + listed + self.choices.js_tail(module)
            if line in (full, full.removesuffix(";")) and self._names_fit(ns, listed, whole=True):
                return True
        return False

    def committed(self, line: str) -> bool:
        return line.startswith(self.choices.keyword + " ")

    def _holds(self, text: str) -> bool:
        """The model's own line cannot work: it imports again a name the file's other imports
        bind (a duplicate identifier; the 1.5B model copies the import row below the cursor), or
        its module path names no file (see ``_no_such_module``)."""
        split = self._split(text)
        if split is None:
            return False
        rest = split[0]
        if "}" in rest:
            return self._no_such_module(rest)
        *done, last = (n.strip() for n in rest.split(","))
        bound = self.choices.bound
        if any(n in bound for n in done):
            return True
        offered = {n for ns in self.choices.modules.values() for n in ns}
        return (
            bool(last)
            and any(b.startswith(last) for b in bound)
            and not any(n.startswith(last) for n in offered)
        )

    def _no_such_module(self, rest: str) -> bool:
        """A relative module path into a folder whose modules ``choices.siblings`` lists whole,
        matching none of them (rxjs's timeInterval.ts wrote ``'../util/operate'`` for ``operate``
        of ``'../util/lift'``). A package, another folder or a module that exists is the model's."""
        found = _SPEC_SO_FAR.search(rest)
        if found is None or "/" not in found.group(2):
            return False
        spec, whole = found.group(2), bool(found.group(3))
        if spec[: spec.rindex("/") + 1] not in self.choices.siblings:
            return False
        for known in (*self.choices.siblings, *self.choices.modules):
            if known.endswith("/"):
                continue
            if not whole and known.startswith(spec):
                return False
            tail = spec[len(known) :] if spec.startswith(known) else None
            if tail is not None and any(end == tail if whole else end.startswith(tail) for end in _ENDINGS):
                return False
        return True

    def _more(self, line: str) -> bool:
        """The names listed so far all come from a module that gives other missing names too."""
        split = self._split(line)
        if split is None or "}" in split[0]:
            return False
        listed = {n.strip() for n in split[0].split(",") if n.strip()}
        return any(listed <= set(ns) and set(ns) - listed for ns in self.choices.modules.values())

    def pick(self, text: str, ranked: Sequence[tuple[int, str, float]]) -> int:
        """As ``ImportGuide.pick``, but a list that could name more missing names of its module
        goes on (a comma) rather than closing, when the model finds a comma plausible (within the
        margin): the code below uses them all, and the 1.5B model tends to stop after the first
        (rxjs: ``import { ObservableInput } from '../types';`` for ``OperatorFunction,
        ObservableInput``)."""
        choice = super().pick(text, ranked)
        if self.released or "\n" in text or not ranked:
            return choice
        line = self.typed + text
        piece = next((p for t, p, _ in ranked if t == choice), "")
        if "}" not in piece or not self._more(line):
            return choice
        best = ranked[0][2]
        for tok, p, logit in ranked:
            if p.strip().startswith(",") and self.viable(line + p) and best - logit <= self.margin:
                return tok
        return choice


def _entry(names: tuple[str, ...], listed: str) -> str | None:
    """The entry of ``names`` a whole listed name (``a``, ``a as b``) is: itself, or the name it
    binds under an alias; None for none."""
    if listed in names:
        return listed
    m = _ALIASED.fullmatch(listed)
    return m.group(1) if m is not None and m.group(1) in names else None


def _aliasing(line: str, statement: str, *, whole: bool) -> bool:
    """``line`` is ``statement`` followed by an alias clause (``import a.b as b``), whole or, unless
    ``whole``, being written."""
    if not line.startswith(statement + " "):
        return False
    rest = f"x{line[len(statement) :]}"  # the clause after a stand-in name
    return (_ALIASED if whole else _ALIASING).fullmatch(rest) is not None and (not whole or " as " in rest)


def import_guide(choices: ImportChoices | None, prefix: str, suffix: str = "") -> ImportGuide | None:
    """A guide for a cursor (``prefix``: the document before it, ``suffix``: after it) whose line so
    far could start one of ``choices``, or be the next names of an open import list whose module has
    some; else None."""
    if not choices:
        return None
    start = prefix.rfind("\n") + 1
    typed = prefix[start:].lstrip()
    if choices.language == "js":
        # The names typed and a relative module begun (``import { observeNotification } from '..``):
        # the module is the workspace file that defines them and the model's own path a guess (rxjs's
        # served run, with other files' import rows in the prompt: ``'../observable/observeNotification'``
        # preferred over ``'../Notification'`` by more than ``MARGIN``): held as firmly as a barrel's row.
        begun = _SPEC_SO_FAR.search(typed)
        firm = choices.keyword == "export" or (begun is not None and begun.group(2).startswith("."))
        js = JsImportGuide(choices, typed, margin=EXPORT_MARGIN if firm else MARGIN)
        return js if js.viable(typed) else None
    within = open_list(prefix[max(0, start - 4000) : start])
    if within is not None and within not in choices.modules:
        return None  # a list of a module with nothing the file lacks
    below = suffix.partition("\n")[2]
    guide = ImportGuide(choices, typed, within=within, list_below=_LIST_BELOW.match(below) is not None)
    return guide if guide.viable(typed) else None
