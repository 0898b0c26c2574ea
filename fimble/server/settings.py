"""Server settings: the raw JSON a client sends, and the typed, defaulted ``Settings`` the server uses.

Clients send settings in ``initializationOptions`` and ``workspace/didChangeConfiguration`` (or answer
``workspace/configuration``), either bare or under a ``"fimble"`` key, with camelCase names::

    {"model": "qwen2.5-coder-1.5b", "threads": 0, "maxTokens": 64, "multiline": "auto",
     "debounceMs": 0, "deadlineMs": 4000, "invokedDeadlineMs": 60000, "prefixTokens": 768,
     "suffixTokens": 128, "contextTokens": 256,
     "languages": {"markdown": false, "*": true}, "index": {"exclude": ["**/vendor/**"]},
     "enable": true, "completionFallback": "auto", "acceptanceLog": true,
     "firstSuggestionMs": 1600, "firstPromptTokens": 384, "kvStateMb": 1024, "speculative": true}

The settings are the connection's own: they shape that client's requests (budgets, ``multiline``,
and ``tuning``: speculative decoding and the cold-place first prompt) and never another client's.
The model, its threads and ``kvStateMb`` are the exceptions: one model and one KV state store serve
the whole process, so a client that sets them sets them for every client
(``fimble.completion.tuning`` says why).

Each field is validated on its own: a bad value yields one problem naming the setting (shown to the
user) and the field keeps its previous value, so the rest of the settings still apply.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from fimble.completion.prompt.fim import CONTEXT_TOKENS, PREFIX_TOKENS, SUFFIX_TOKENS
from fimble.completion.tuning import Tuning

__all__ = ["Resolved", "Settings", "merge_raw", "resolve", "section"]

Raw = Mapping[str, Any]


@dataclass(frozen=True)
class Settings:
    """What the server does; every field has a default that works on a 2-core laptop."""

    enable: bool = True  # automatic suggestions; `fimble.toggle` flips it; explicit invocations still work
    model: str | None = None  # None: the model `fimble serve --model` loaded (registry default)
    threads: int = 0  # 0: physical cores
    max_tokens: int = 64
    multiline: str = "auto"  # auto | always | never
    debounce_ms: int = 0  # server-side debounce of automatic requests; 0 when the client debounces
    deadline_ms: int = 4000  # per request, from arrival; a late request returns its whole lines
    # An invoked request (the user asked) is answered from the full prompt, cold or not, within this
    # (~1,100 tokens: 9 s at 120 prompt tokens/s, 25 s at 45); an automatic one takes a smaller first
    # prompt where the cache is cold and waits for it to be read up to this long too.
    invoked_deadline_ms: int = 60_000
    prefix_tokens: int = PREFIX_TOKENS  # context budget before the cursor
    suffix_tokens: int = SUFFIX_TOKENS  # and after it (evaluated again on every keystroke)
    context_tokens: int = CONTEXT_TOKENS  # other files' snippets (repository context)
    languages: tuple[tuple[str, bool], ...] = ()  # languageId -> enabled; "*" for the rest
    index_exclude: tuple[str, ...] = ()  # extra glob patterns the indexer skips
    completion_fallback: str = "auto"  # textDocument/completion: auto (no inline support) | always | never
    acceptance_log: bool = True  # shown/accepted events to a local JSONL file; nothing leaves the machine
    first_suggestion_ms: int = 1600  # target in a cold region: a first prompt, the full one warmed up
    first_prompt_tokens: int = 384  # the least a cold region's first prompt reads (its answer's quality)
    kv_state_mb: int = 1024  # saved KV states on disk (files switched back to, restarts); 0: none
    speculative: bool = True  # prompt-lookup drafts checked in batches: faster generation, same output

    def language_enabled(self, language_id: str | None) -> bool:
        table = dict(self.languages)
        return table.get(language_id or "", table.get("*", True))

    @property
    def multiline_flag(self) -> bool | None:
        """``CompletionRequest.multiline``: None lets the engine decide from the cursor."""
        return {"auto": None, "always": True, "never": False}[self.multiline]

    @property
    def tuning(self) -> Tuning:
        """``CompletionRequest.tuning``: how this client's requests run on the shared engine."""
        return Tuning(
            speculative=self.speculative,
            first_ms=self.first_suggestion_ms,
            first_tokens=self.first_prompt_tokens,
        )


@dataclass(frozen=True)
class Resolved:
    settings: Settings
    problems: tuple[str, ...] = ()


def section(payload: object) -> Raw:
    """The fimble part of a settings payload: ``payload["fimble"]`` when present, else the payload."""
    if isinstance(payload, Mapping):
        inner = payload.get("fimble")
        return inner if isinstance(inner, Mapping) else payload
    return {}


def merge_raw(base: Raw, update: Raw) -> dict[str, Any]:
    """``update`` over ``base``, nested mappings merged, so a partial change keeps earlier values."""
    out = dict(base)
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge_raw(out[key], value)
        else:
            out[key] = value
    return out


# -- field parsers: return the typed value or raise ValueError saying what is expected ---------------


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    raise ValueError("expected true or false")


def _int_range(lo: int, hi: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, int) and not isinstance(value, bool) and lo <= value <= hi:
            return value
        raise ValueError(f"expected an integer from {lo} to {hi}")

    return parse


def _choice(*options: str) -> Callable[[object], str]:
    def parse(value: object) -> str:
        if isinstance(value, str) and value in options:
            return value
        raise ValueError("expected one of " + ", ".join(repr(o) for o in options))

    return parse


def _model(value: object) -> str | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value.strip() if isinstance(value, str) else None
    raise ValueError("expected a model name from `fimble models list` or a .gguf path")


def _languages(value: object) -> tuple[tuple[str, bool], ...]:
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, bool) for k, v in value.items()
    ):
        return tuple(sorted(value.items()))
    raise ValueError('expected an object of languageId -> true/false, e.g. {"markdown": false}')


def _globs(value: object) -> tuple[str, ...]:
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ValueError('expected a list of glob patterns, e.g. ["**/vendor/**"]')


# JSON path (camelCase) -> (Settings field, parser)
_FIELDS: dict[tuple[str, ...], tuple[str, Callable[[object], Any]]] = {
    ("enable",): ("enable", _bool),
    ("model",): ("model", _model),
    ("threads",): ("threads", _int_range(0, 256)),
    ("maxTokens",): ("max_tokens", _int_range(1, 1024)),
    ("multiline",): ("multiline", _choice("auto", "always", "never")),
    ("debounceMs",): ("debounce_ms", _int_range(0, 5000)),
    ("deadlineMs",): ("deadline_ms", _int_range(50, 120_000)),
    ("invokedDeadlineMs",): ("invoked_deadline_ms", _int_range(50, 300_000)),
    ("prefixTokens",): ("prefix_tokens", _int_range(16, 3072)),
    ("suffixTokens",): ("suffix_tokens", _int_range(0, 1024)),
    ("contextTokens",): ("context_tokens", _int_range(0, 4096)),
    ("languages",): ("languages", _languages),
    ("index", "exclude"): ("index_exclude", _globs),
    ("completionFallback",): ("completion_fallback", _choice("auto", "always", "never")),
    ("acceptanceLog",): ("acceptance_log", _bool),
    ("firstSuggestionMs",): ("first_suggestion_ms", _int_range(0, 60_000)),
    ("firstPromptTokens",): ("first_prompt_tokens", _int_range(16, 8192)),
    ("kvStateMb",): ("kv_state_mb", _int_range(0, 1 << 20)),
    ("speculative",): ("speculative", _bool),
}
_GROUPS = {path[0] for path in _FIELDS if len(path) > 1}
assert {attr for attr, _ in _FIELDS.values()} == {f.name for f in fields(Settings)}


def _lookup(raw: Raw, path: tuple[str, ...]) -> tuple[bool, object]:
    node: object = raw
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return False, None
        node = node[key]
    return True, node


def _unknown_keys(raw: Raw) -> list[str]:
    known_top = {path[0] for path in _FIELDS}
    out = [f"fimble.{k}" for k in raw if k not in known_top]
    for group in _GROUPS:
        sub = raw.get(group)
        if isinstance(sub, Mapping):
            known = {p[1] for p in _FIELDS if p[0] == group}
            out += [f"fimble.{group}.{k}" for k in sub if k not in known]
        elif group in raw:
            out.append(f"fimble.{group} (expected an object)")
    return out


def resolve(raw: Raw, base: Settings | None = None) -> Resolved:
    """Typed settings from ``raw`` (a ``section``), each bad field reported and left at ``base``'s value."""
    base = base or Settings()
    values: dict[str, Any] = {}
    problems: list[str] = []
    for path, (attr, parse) in _FIELDS.items():
        present, value = _lookup(raw, path)
        if not present:
            continue
        try:
            values[attr] = parse(value)
        except ValueError as err:
            name = "fimble." + ".".join(path)
            problems.append(f"{name}: {err}, got {value!r}; using {getattr(base, attr)!r}")
    problems += [f"{name}: unknown setting, ignored" for name in _unknown_keys(raw)]
    return Resolved(replace(base, **values), tuple(problems))
