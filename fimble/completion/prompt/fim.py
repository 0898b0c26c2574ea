"""FIM (fill-in-the-middle) formats and prompt assembly as token ids.

Prompts are built from token ids, never from a string that is tokenized as a whole: file text is
tokenized with ``special=False`` and the control tokens are spliced in by id, so a file that contains
``<|endoftext|>`` or ``<|fim_middle|>`` cannot inject control tokens. (llama-cpp-python's
``create_completion(suffix=...)`` is broken in 0.3.36 and is not used.)

The layout is the one the models were trained on, prefix-suffix-middle, with repository files first
(the most stable part). llama.vim instead moves the cursor's line after the middle token so that typing
only appends tokens; measured with Qwen2.5-Coder that costs quality (doubled spaces, re-typed
identifiers: ``numbers.so`` -> ``ort()``). fimble keeps the trained layout and makes typing cheap in the
engine instead, by moving the cached suffix into place (see ``fimble.completion.engine.kvplan``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from fimble.errors import ModelUnsupported
from fimble.models.fim_tokens import REQUIRED_ROLES, Family, families

__all__ = [
    "CONTEXT_TOKENS",
    "PREFIX_TOKENS",
    "SUFFIX_TOKENS",
    "FimPrompt",
    "FimTokens",
    "PromptPart",
    "build_prompt",
    "candidate_texts",
    "detect_fim",
]

Tokenize = Callable[[str], list[int]]

# Token budgets, the defaults of every front door. A cold place answers only once its whole prompt
# is evaluated (~100 tok/s on 2 cores), so the prompt is kept near 900 tokens: on 30 lines each of
# requests and flask (full prompt, context on, docs/quality.md#prompt-layout) 768/128/256 matched
# 50% and 57% at a p50 of 9 s, against 43% at 27 s for the earlier 1536/64/1024. Everything after
# the cursor is evaluated again on each keystroke (its KV depends on the text before it), which is
# what the 64 extra suffix tokens cost; the 64-token suffix matched 40% and 53% on the same lines.
PREFIX_TOKENS = 768
SUFFIX_TOKENS = 128
CONTEXT_TOKENS = 256


@dataclass(frozen=True)
class FimTokens:
    """The control-token ids of one loaded model."""

    family: str
    prefix: int
    suffix: int
    middle: int
    pad: int | None = None
    repo_name: int | None = None
    file_sep: int | None = None
    stop: frozenset[int] = field(default_factory=frozenset)

    @property
    def repo_level(self) -> bool:
        """Whether the model knows Qwen/StarCoder2-style multi-file prompts."""
        return self.repo_name is not None and self.file_sep is not None


def _first(vocab: Mapping[str, int], texts: Sequence[str]) -> int | None:
    for text in texts:
        if text in vocab:
            return vocab[text]
    return None


def candidate_texts() -> set[str]:
    """Every control-token spelling any family uses: what the engine looks up in a vocabulary."""
    return {t for f in families() for group in (*f.spellings.values(), f.stop) for t in group}


def detect_fim(vocab: Mapping[str, int], eog: frozenset[int] = frozenset()) -> FimTokens:
    """Find the model's FIM control tokens from its vocabulary (token text -> id).

    The families are data (``fimble/models/fim_tokens.toml``, shared with `fimble doctor`); the one
    with prefix, suffix and middle present and the most roles matched wins. ``eog`` is the
    vocabulary's own end-of-generation set, merged into the stop tokens. Raises
    ``ModelUnsupported`` naming the tokens looked for when no family matches.
    """
    best: tuple[int, Family, dict[str, int]] | None = None
    for family in families():
        found = {
            role: i for role, texts in family.spellings.items() if (i := _first(vocab, texts)) is not None
        }
        if not all(role in found for role in REQUIRED_ROLES):
            continue
        if best is None or len(found) > best[0]:
            best = (len(found), family, found)
    if best is None:
        wanted = ", ".join(
            f"{f.name} ({' '.join(f.spellings['prefix'][:1] + f.spellings['middle'][:1])})"
            for f in families()
        )
        raise ModelUnsupported(
            "this model has no fill-in-the-middle tokens; fimble needs one of: "
            f"{wanted}. Use a coder model: `fimble models pull qwen2.5-coder-1.5b`."
        )
    _, family, found = best
    stop = {vocab[t] for t in family.stop if t in vocab} | set(eog)
    if "pad" in found:
        stop.add(found["pad"])
    return FimTokens(
        family=family.name,
        prefix=found["prefix"],
        suffix=found["suffix"],
        middle=found["middle"],
        pad=found.get("pad"),
        repo_name=found.get("repo"),
        file_sep=found.get("file_sep"),
        stop=frozenset(stop),
    )


@dataclass(frozen=True)
class PromptPart:
    """One labelled run of prompt tokens; ``reason`` says why it is there (for `fimble explain`)."""

    kind: str
    tokens: tuple[int, ...]
    reason: str = ""
    path: str = ""  # the other file a context part comes from


@dataclass(frozen=True)
class FimPrompt:
    parts: tuple[PromptPart, ...]
    # The file line the prefix starts at (``build_prompt``): asking for the same start again
    # (``prefix_start``) keeps the prompt's head, and so its KV, the same further down the file.
    prefix_line: int = 0

    @property
    def tokens(self) -> list[int]:
        out: list[int] = []
        for part in self.parts:
            out.extend(part.tokens)
        return out

    def __len__(self) -> int:
        return sum(len(p.tokens) for p in self.parts)

    @property
    def stable_len(self) -> int:
        """Tokens before the FIM prefix token: self-contained chunks the engine may move in its cache."""
        n = 0
        for part in self.parts:
            if part.kind == "prefix":
                break
            n += len(part.tokens)
        return n


# The prefix's first line moves in steps of this many lines, so that pressing Enter does not shift the
# whole prefix (and invalidate the model's cache for all of it) on every new line.
_ANCHOR_LINES = 16


def _keep_tail_lines(
    tokenize: Tokenize, text: str, budget: int, start_at: int | None = None
) -> tuple[int, list[int]]:
    """The last whole lines of ``text`` that fit ``budget`` tokens, starting at an anchor line;
    returns the first kept line's index and the tokens.

    Lines are measured from the end one at a time, so a large file costs only the lines that fit,
    never a tokenization of the whole file. Cutting at line starts, in steps of ``_ANCHOR_LINES``,
    keeps the kept text identical while the user types further down. ``start_at``, when its lines
    fit, is taken as it is: the start of an earlier prompt whose KV is kept (a small first prompt's,
    whose few lines would otherwise move their anchor one line at a time).
    """
    lines = text.splitlines(keepends=True)
    start, used = len(lines), 0
    while start > 0:
        n = len(tokenize(lines[start - 1]))
        if used + n > budget:
            break
        used += n
        start -= 1
    if start_at is not None and start <= start_at <= len(lines):
        start = start_at
    elif start > 0:  # round up to an anchor, giving up at most a quarter of what fits
        step = max(1, min(_ANCHOR_LINES, (len(lines) - start) // 4))
        start = -(-start // step) * step
    return start, tokenize("".join(lines[start:]))


def _keep_head_lines(tokenize: Tokenize, text: str, budget: int) -> list[int]:
    """The first whole lines of ``text`` that fit ``budget`` tokens, measured one line at a time."""
    lines = text.splitlines(keepends=True)
    end, used = 0, 0
    while end < len(lines):
        n = len(tokenize(lines[end]))
        if used + n > budget:
            break
        used += n
        end += 1
    return tokenize("".join(lines[:end]))


def build_prompt(
    tokenize: Tokenize,
    fim: FimTokens,
    prefix: str,
    suffix: str,
    *,
    path: str | None = None,
    repo: str | None = None,
    files: Sequence[tuple[str, str, str]] = (),
    prefix_budget: int = PREFIX_TOKENS,
    suffix_budget: int = SUFFIX_TOKENS,
    context_budget: int = CONTEXT_TOKENS,
    prefix_start: int | None = None,
) -> FimPrompt:
    """Assemble a FIM prompt, most stable part first.

    ``files`` are other files' snippets as (path, text, reason), already chosen and ordered by the
    caller, best first; they are taken in that order while they fit ``context_budget`` tokens, and
    laid out in the reverse order, so the best one sits right before the current file (a small
    model attends most to what is nearest, as in its repo-level training, where the imported file
    comes just before its importer). Prefix and suffix are
    cut at line boundaries to their token budgets; the prefix keeps the cursor's line whole so that
    its top edge stays put while the user types on that line. ``prefix_start`` asks for the prefix
    to start at that line of the file (a previous prompt's ``prefix_line``) when the lines from it
    fit ``prefix_budget``.
    """
    cut = prefix.rfind("\n") + 1
    head, line = prefix[:cut], prefix[cut:]
    head_budget = max(0, prefix_budget - len(tokenize(line)))
    parts: list[PromptPart] = []
    if fim.repo_level and (files or path):
        assert fim.repo_name is not None and fim.file_sep is not None
        parts.append(
            PromptPart("repo", (fim.repo_name, *tokenize(f"{repo or 'workspace'}\n")), "repository name")
        )
        used = 0
        chosen: list[PromptPart] = []
        for file_path, text, reason in files:
            newline = "" if text.endswith("\n") else "\n"
            body = tokenize(f"{file_path}\n{text}{newline}")
            if used + len(body) + 1 > context_budget:
                continue
            used += len(body) + 1
            chosen.append(PromptPart("context", (fim.file_sep, *body), reason, file_path))
        parts.extend(reversed(chosen))
        if path:
            parts.append(PromptPart("path", (fim.file_sep, *tokenize(f"{path}\n")), "current file"))
    elif files:
        # No repo-level format: other files go first as plain text, separated by blank lines.
        used = 0
        plain: list[PromptPart] = []
        for file_path, text, reason in files:
            body = tokenize(f"{file_path}\n{text}\n\n")
            if used + len(body) > context_budget:
                continue
            used += len(body)
            plain.append(PromptPart("context", tuple(body), reason, file_path))
        parts.extend(reversed(plain))
    first_line, kept = _keep_tail_lines(tokenize, head, head_budget, prefix_start)
    prefix_tokens = kept + tokenize(line)
    parts.append(PromptPart("prefix", (fim.prefix, *prefix_tokens), "file before the cursor"))
    parts.append(
        PromptPart(
            "suffix",
            (fim.suffix, *_keep_head_lines(tokenize, suffix, suffix_budget)),
            "file after the cursor",
        )
    )
    parts.append(PromptPart("middle", (fim.middle,), "generation starts here"))
    return FimPrompt(tuple(parts), first_line)
