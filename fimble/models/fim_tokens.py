"""Find a model's fill-in-the-middle token ids from its GGUF vocabulary and metadata.

FIM prompts are assembled from token ids (never by tokenizing the marker text, which a tokenizer
may split), so the engine needs the ids. Newer GGUF files name them in
``tokenizer.ggml.fim_*_token_id``; older ones only have the tokens in the vocabulary, spelled
differently per model family. The spellings are data in ``fim_tokens.toml``.
"""

from __future__ import annotations

import functools
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble.errors import ModelUnsupported

__all__ = ["METADATA_KEYS", "REQUIRED_ROLES", "ROLES", "Family", "FimTokens", "detect_fim_tokens", "families"]

ROLES = ("prefix", "suffix", "middle", "pad", "repo", "file_sep", "eot")
REQUIRED_ROLES = ("prefix", "suffix", "middle")

# GGUF keys that carry FIM ids directly; the first present (and in range) wins.
METADATA_KEYS: Mapping[str, tuple[str, ...]] = {
    "prefix": ("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id"),
    "suffix": ("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id"),
    "middle": ("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id"),
    "pad": ("tokenizer.ggml.fim_pad_token_id",),
    "repo": ("tokenizer.ggml.fim_rep_token_id",),
    "file_sep": ("tokenizer.ggml.fim_sep_token_id",),
    "eot": (),
}

_DATA_FILE = Path(__file__).with_name("fim_tokens.toml")


@dataclass(frozen=True)
class Family:
    """One model family's FIM spellings by role, plus the extra tokens generation must stop at."""

    name: str
    spellings: Mapping[str, tuple[str, ...]]
    stop: tuple[str, ...] = ()


@dataclass(frozen=True)
class FimTokens:
    """FIM token ids by role; ``None`` where the model has no such token.

    ``texts`` maps each found role to its vocabulary text (for prompts shown in debug output);
    ``family`` is the best-matching family from ``fim_tokens.toml`` (None if no spelling matched).
    """

    prefix: int | None = None
    suffix: int | None = None
    middle: int | None = None
    pad: int | None = None
    repo: int | None = None
    file_sep: int | None = None
    eot: int | None = None
    family: str | None = None
    texts: Mapping[str, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """True when the model can do FIM at all (prefix, suffix and middle all known)."""
        return all(getattr(self, role) is not None for role in REQUIRED_ROLES)

    @property
    def missing(self) -> list[str]:
        return [role for role in REQUIRED_ROLES if getattr(self, role) is None]

    def ids(self) -> dict[str, int]:
        """Role -> id for the roles that were found."""
        return {role: getattr(self, role) for role in ROLES if getattr(self, role) is not None}

    def require(self, model: str = "this model") -> FimTokens:
        """Return self, or raise ``ModelUnsupported`` naming the missing roles."""
        if not self.complete:
            raise ModelUnsupported(
                f"{model} has no fill-in-the-middle tokens ({', '.join(self.missing)} missing): "
                "use a FIM-capable code model such as `fimble models pull qwen2.5-coder-1.5b`"
            )
        return self


@functools.cache
def families() -> tuple[Family, ...]:
    """The families in ``fim_tokens.toml``, in file order (shared with the prompt builder)."""
    with open(_DATA_FILE, "rb") as fh:
        data = tomllib.load(fh)
    return tuple(
        Family(
            name=entry["name"],
            spellings={role: tuple(entry[role]) for role in ROLES if role in entry},
            stop=tuple(entry.get("stop", ())),
        )
        for entry in data["family"]
    )


def _id_from_metadata(metadata: Mapping[str, Any], role: str, vocab_size: int | None) -> int | None:
    for key in METADATA_KEYS[role]:
        value = metadata.get(key)
        in_range = isinstance(value, int) and 0 <= value < (vocab_size if vocab_size is not None else 1 << 62)
        if in_range and not isinstance(value, bool):
            return value  # type: ignore[return-value]
    return None


def detect_fim_tokens(
    metadata: Mapping[str, Any],
    tokens: Sequence[bytes] | None,
) -> FimTokens:
    """Combine metadata ids with vocabulary spellings into one ``FimTokens``.

    ``tokens`` is the raw vocabulary (UTF-8 bytes per id), or None if the file has none; only the
    candidate spellings are looked up, so a 150k-token vocabulary costs one dictionary build.
    """
    vocab_size = len(tokens) if tokens is not None else None
    wanted: set[bytes] = {
        s.encode() for fam in families() for spellings in fam.spellings.values() for s in spellings
    }
    index: dict[bytes, int] = {}
    if tokens is not None:
        for i, tok in enumerate(tokens):
            if tok in wanted and tok not in index:
                index[tok] = i

    best: Family | None = None
    best_ids: dict[str, int] = {}
    for fam in families():
        found: dict[str, int] = {}
        for role, spellings in fam.spellings.items():
            for s in spellings:
                if s.encode() in index:
                    found[role] = index[s.encode()]
                    break
        if len(found) > len(best_ids):
            best, best_ids = fam, found

    ids: dict[str, int] = {}
    for role in ROLES:
        from_meta = _id_from_metadata(metadata, role, vocab_size)
        if from_meta is not None:
            ids[role] = from_meta
        elif role in best_ids:
            ids[role] = best_ids[role]

    texts: dict[str, str] = {}
    if tokens is not None:
        texts = {role: tokens[i].decode("utf-8", "replace") for role, i in ids.items()}
    return FimTokens(family=best.name if best else None, texts=texts, **ids)
