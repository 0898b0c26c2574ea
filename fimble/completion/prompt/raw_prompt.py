"""Turning a prompt a client already rendered back into what fimble builds prompts from.

HTTP clients (Continue's ``llama.cpp`` and ``openai`` providers, Ollama clients, scripts) send text in
the model's FIM format, e.g. for Qwen::

    <|repo_name|>proj\\n<|file_sep|>lib/a.py\\n...<|file_sep|>app.py\\n<|fim_prefix|>...<|fim_suffix|>...<|fim_middle|>

Completing that text as is would mean tokenizing client text with special tokens enabled (a file that
contains ``<|fim_middle|>`` could then steer the model) and would bypass fimble's layout, budgets and
KV reuse. So the text is parsed back into other files, the current path, prefix and suffix, and the
prompt is rebuilt from token ids by ``fimble.completion.prompt.fim.build_prompt``.

Continue puts its context snippets into the prefix as line comments::

    // Path: src/util.ts
    // export function add(a, b) {
    // src/app.ts
    <the real prefix>

Those blocks become context files again and the last line names the current file. Everything here is
pure string work, testable without a model.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from fimble.models.fim_tokens import Family, families

__all__ = ["RawPrompt", "parse_prompt", "split_continue_snippets"]

# (path, text, reason), the shape of ``CompletionRequest.context_files``.
ContextFile = tuple[str, str, str]

# A file path as Continue prints it: no spaces; an extension, at least one directory, or a dotfile
# (``.env``: the secrets list must see the path to refuse it).
_PATH_LIKE = re.compile(
    r"^(?:[\w.@+~-]+/)*[\w.@+~-]*[\w@+~-]\.[A-Za-z0-9_+-]{1,12}$|^(?:[\w.@+~-]+/)+[\w.@+~-]+$"
    r"|^\.\w[\w.@+~-]*$"
)
# A line-comment mark: punctuation only (//, #, --, ;, %, ', !), never a word.
_COMMENT_MARK = re.compile(r"^[^\w\s]{1,3}$")


@dataclass(frozen=True)
class RawPrompt:
    """What a client's prompt means: a cursor between ``prefix`` and ``suffix`` in ``path``.

    ``fim`` is false for a plain prompt (no FIM markers and no separate suffix): such a prompt is
    completed as plain text and ``prefix`` holds all of it.
    """

    prefix: str
    suffix: str = ""
    fim: bool = False
    path: str | None = None
    repo: str | None = None
    files: tuple[ContextFile, ...] = field(default=())
    family: str | None = None  # the FIM format the client rendered, if any


def _markers(family: Family, role: str) -> tuple[str, ...]:
    # SentencePiece spellings (``▁<PRE>``) are vocabulary pieces, never what a client writes.
    return tuple(t for t in family.spellings.get(role, ()) if not t.startswith("▁"))


_REPO_MARKS = tuple(dict.fromkeys(t for f in families() for t in _markers(f, "repo")))
_FILE_MARKS = tuple(dict.fromkeys(t for f in families() for t in _markers(f, "file_sep")))


def _find_last(text: str, marks: tuple[str, ...], end: int) -> tuple[int, str] | None:
    best: tuple[int, str] | None = None
    for mark in marks:
        i = text.rfind(mark, 0, end)
        if i >= 0 and (best is None or i > best[0]):
            best = (i, mark)
    return best


def _split_fim(prompt: str) -> tuple[str, str, str, str, str] | None:
    """(family, head, prefix, suffix, middle) of the first FIM family whose three markers occur.

    Markers are searched from the end: the client's template wraps the document, so the last
    middle marker is the real one even if the code itself mentions the token text.
    """
    for family in families():
        mid = _find_last(prompt, _markers(family, "middle"), len(prompt))
        if mid is None:
            continue
        pre = _find_last(prompt, _markers(family, "prefix"), mid[0])
        suf = _find_last(prompt, _markers(family, "suffix"), mid[0])
        if pre is None or suf is None:
            continue
        middle = prompt[mid[0] + len(mid[1]) :]
        if pre[0] < suf[0]:  # prefix-suffix-middle, the trained order
            head = prompt[: pre[0]]
            prefix = prompt[pre[0] + len(pre[1]) : suf[0]]
            suffix = prompt[suf[0] + len(suf[1]) : mid[0]]
        else:  # suffix-prefix-middle
            head = prompt[: suf[0]]
            suffix = prompt[suf[0] + len(suf[1]) : pre[0]]
            prefix = prompt[pre[0] + len(pre[1]) : mid[0]]
        if family.name == "codellama":  # "<PRE> {prefix} <SUF>{suffix} <MID>"
            prefix = prefix[1:] if prefix.startswith(" ") else prefix
            prefix = prefix[:-1] if prefix.endswith(" ") else prefix
            suffix = suffix[:-1] if suffix.endswith(" ") else suffix
        return family.name, head, prefix, suffix, middle
    return None


def _looks_like_path(text: str) -> bool:
    return bool(_PATH_LIKE.match(text))


def _parse_head(head: str) -> tuple[str | None, list[ContextFile], str | None, str]:
    """Repository-level context before the FIM prefix: (repo, files, current path, leftover text).

    ``<|repo_name|>name\\n<|file_sep|>path\\ntext\\n<|file_sep|>current/path\\n``: the last file
    entry without text names the current file.
    """
    repo: str | None = None
    rest = head
    found = _find_last(rest, _REPO_MARKS, len(rest))
    if found is not None:
        after = rest[found[0] + len(found[1]) :]
        name, _, rest = after.partition("\n")
        repo = name.strip() or None
    marks = [m for m in _FILE_MARKS if m in rest]
    if not marks:
        return repo, [], None, rest if repo is None else ""
    pattern = "|".join(re.escape(m) for m in marks)
    segments = re.split(pattern, rest)
    leftover = segments[0] if segments[0].strip() else ""
    files: list[ContextFile] = []
    path: str | None = None
    for i, segment in enumerate(segments[1:]):
        first, _, body = segment.partition("\n")
        if not _looks_like_path(first.strip()):
            first, body = "", segment  # StarCoder2-style entries carry no path line
        if body.endswith("\n"):
            body = body[:-1]
        is_last = i == len(segments) - 2
        if is_last and not body.strip() and first.strip():
            path = first.strip()
        elif body.strip():
            files.append((first.strip(), body, "client context"))
    return repo, files, path, leftover


def split_continue_snippets(prefix: str) -> tuple[list[ContextFile], str | None, str]:
    """Continue's commented snippet block at the top of ``prefix``: (files, current path, real prefix).

    Continue renders ``<mark> Path: p`` + commented lines per snippet, then ``<mark> current/path``,
    then the real prefix; with no snippets the block is ``\\n<mark> current/path\\n``. A prefix that
    does not start that way is returned unchanged.
    """
    lines = prefix.split("\n")
    start = 1 if lines and lines[0] == "" else 0
    if start >= len(lines) - 1:
        return [], None, prefix
    mark, sep, first = lines[start].partition(" ")
    if not sep or not _COMMENT_MARK.match(mark):
        return [], None, prefix
    has_snippets = first.startswith("Path: ")
    if not has_snippets and not (start == 1 and _looks_like_path(first.strip())):
        return [], None, prefix
    if not has_snippets:
        return [], first.strip(), "\n".join(lines[start + 1 :])
    # The commented run; the current-file line is the last path-like comment after the last header.
    end = start
    while end < len(lines) - 1 and (lines[end] == mark or lines[end].startswith(mark + " ")):
        end += 1
    body = [line[len(mark) + 1 :] for line in lines[start:end]]
    headers = [i for i, text in enumerate(body) if text.startswith("Path: ")]
    current = next(
        (i for i in range(len(body) - 1, headers[-1], -1) if _looks_like_path(body[i].strip())), None
    )
    if current is None:
        return [], None, prefix
    files: list[ContextFile] = []
    bounds = [*headers, current]
    for h, nxt in itertools.pairwise(bounds):
        path = body[h][len("Path: ") :].strip()
        text = "\n".join(body[h + 1 : nxt])
        if text.strip():
            files.append((path, text + "\n", "client snippet"))
    return files, body[current].strip(), "\n".join(lines[start + current + 1 :])


def parse_prompt(prompt: str, suffix: str | None = None) -> RawPrompt:
    """Parse a client prompt (and the separate ``suffix`` some APIs send) into a ``RawPrompt``.

    With FIM markers in ``prompt`` the markers decide (a separate ``suffix`` is then appended to the
    parsed one, which is empty in practice). Without markers, a given ``suffix`` makes it a FIM
    request with ``prompt`` as the prefix; otherwise it is plain text.
    """
    split = _split_fim(prompt)
    if split is None:
        if suffix is None:
            return RawPrompt(prefix=prompt)
        files, path, prefix = split_continue_snippets(prompt)
        return RawPrompt(prefix=prefix, suffix=suffix, fim=True, path=path, files=tuple(files))
    family, head, prefix, fim_suffix, middle = split
    repo, files, path, leftover = _parse_head(head)
    snippets, snippet_path, prefix = split_continue_snippets(leftover + prefix)
    return RawPrompt(
        # Text after the middle marker is the start of the middle (the cursor's line, llama.vim style).
        prefix=prefix + middle,
        suffix=fim_suffix + (suffix or ""),
        fim=True,
        path=path or snippet_path,
        repo=repo,
        files=tuple(files + snippets),
        family=family,
    )
