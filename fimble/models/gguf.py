"""Read a GGUF file's header and metadata without touching its weights.

``fimble models list`` and ``fimble doctor`` need the architecture, context length, quantization
and FIM token ids of a 1 GB file in well under a second, without importing llama.cpp. GGUF v2/v3
(https://github.com/ggml-org/ggml/blob/master/docs/gguf.md) is a magic, a version, two counts, then
typed key/value pairs; the tensor infos and weights that follow are never read. The file is
memory-mapped, so only the pages holding the metadata are loaded.

Long arrays (the tokenizer's tokens, scores, merges) are summarised as ``ArrayInfo`` in
``metadata``; the tokens and their types are used once to find special and FIM tokens.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble.errors import ModelCorrupt
from fimble.models.fim_tokens import FimTokens, detect_fim_tokens

__all__ = ["FILE_TYPES", "ArrayInfo", "GGUFInfo", "read_gguf"]

MAGIC = b"GGUF"
_MAX_KV = 1 << 20
_KEEP_ARRAY = 64  # arrays up to this length are kept whole in ``metadata``

# GGUF value types: id -> (struct code, byte size); 8 = string, 9 = array.
_SCALARS: dict[int, tuple[str, int]] = {
    0: ("B", 1), 1: ("b", 1), 2: ("H", 2), 3: ("h", 2), 4: ("I", 4), 5: ("i", 4),
    6: ("f", 4), 7: ("?", 1), 10: ("Q", 8), 11: ("q", 8), 12: ("d", 8),
}  # fmt: skip
_TYPE_NAMES = {
    0: "uint8", 1: "int8", 2: "uint16", 3: "int16", 4: "uint32", 5: "int32", 6: "float32",
    7: "bool", 8: "string", 9: "array", 10: "uint64", 11: "int64", 12: "float64",
}  # fmt: skip
_STRING, _ARRAY = 8, 9

# llama.cpp's llama_ftype (general.file_type): what `models list` shows as quantization.
FILE_TYPES: Mapping[int, str] = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 4: "Q4_1_SOME_F16", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S",
    17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 21: "Q2_K_S", 22: "IQ3_XS", 23: "IQ3_XXS",
    24: "IQ1_S", 25: "IQ4_NL", 26: "IQ3_S", 27: "IQ3_M", 28: "IQ2_S", 29: "IQ2_M", 30: "IQ4_XS",
    31: "IQ1_M", 32: "BF16", 36: "TQ1_0", 37: "TQ2_0", 38: "MXFP4_MOE",
}  # fmt: skip

# tokenizer.ggml.token_type values that mark special tokens.
_CONTROL, _USER_DEFINED = 3, 4


@dataclass(frozen=True)
class ArrayInfo:
    """Stands in ``metadata`` for an array too long to keep (e.g. 151k tokenizer merges)."""

    elem_type: str
    length: int


@dataclass(frozen=True)
class GGUFInfo:
    """What fimble needs to know about a model file before loading it."""

    path: Path
    version: int
    tensor_count: int
    metadata: Mapping[str, Any]
    special_tokens: Mapping[int, str] = field(default_factory=dict)
    fim: FimTokens = field(default_factory=FimTokens)

    def _arch_key(self, suffix: str) -> Any:
        return self.metadata.get(f"{self.architecture}.{suffix}") if self.architecture else None

    @property
    def architecture(self) -> str | None:
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else None

    @property
    def name(self) -> str | None:
        value = self.metadata.get("general.name")
        return value if isinstance(value, str) else None

    @property
    def context_length(self) -> int | None:
        return self._arch_key("context_length")

    @property
    def file_type(self) -> int | None:
        return self.metadata.get("general.file_type")

    @property
    def quantization(self) -> str | None:
        ft = self.file_type
        return FILE_TYPES.get(ft, f"type {ft}") if isinstance(ft, int) else None

    @property
    def vocab_size(self) -> int | None:
        tokens = self.metadata.get("tokenizer.ggml.tokens")
        if isinstance(tokens, ArrayInfo):
            return tokens.length
        return len(tokens) if isinstance(tokens, list) else None

    @property
    def block_count(self) -> int | None:
        return self._arch_key("block_count")

    def token_id(self, key: str) -> int | None:
        """A ``tokenizer.ggml.<key>_token_id`` value, e.g. ``token_id("eos")``."""
        value = self.metadata.get(f"tokenizer.ggml.{key}_token_id")
        return value if isinstance(value, int) else None

    def kv_cache_bytes(self, n_ctx: int, bytes_per_value: int = 2) -> int | None:
        """KV cache size for ``n_ctx`` tokens (f16 by default), or None if the shape is unknown.

        Per layer and token llama.cpp stores one key and one value vector of
        ``head_count_kv * head_dim`` elements.
        """
        n_layer = self.block_count
        n_embd = self._arch_key("embedding_length")
        n_head = self._arch_key("attention.head_count")
        n_head_kv = self._arch_key("attention.head_count_kv") or n_head
        if not all(isinstance(v, int) and v > 0 for v in (n_layer, n_embd, n_head, n_head_kv)):
            return None
        k_len = self._arch_key("attention.key_length") or n_embd // n_head
        v_len = self._arch_key("attention.value_length") or n_embd // n_head
        return n_layer * n_ctx * n_head_kv * (k_len + v_len) * bytes_per_value

    def summary(self) -> dict[str, Any]:
        """A JSON-friendly digest for ``models list --json`` and ``doctor --json``."""
        return {
            "architecture": self.architecture,
            "name": self.name,
            "context_length": self.context_length,
            "quantization": self.quantization,
            "vocab_size": self.vocab_size,
            "gguf_version": self.version,
            "tensor_count": self.tensor_count,
            "fim_family": self.fim.family,
            "fim_tokens": self.fim.ids(),
            "eos_token_id": self.token_id("eos"),
            "eot_token_id": self.token_id("eot"),
        }


class _Truncated(Exception):
    pass


class _Bad(Exception):
    pass


class _Reader:
    """A cursor over the mapped bytes; every read is bounds-checked against the file size."""

    def __init__(self, buf: mmap.mmap | bytes, endian: str) -> None:
        self.buf = buf
        self.end = len(buf)
        self.off = 0
        self.e = endian

    def _take(self, fmt: str, size: int) -> Any:
        if self.off + size > self.end:
            raise _Truncated
        (value,) = struct.unpack_from(self.e + fmt, self.buf, self.off)
        self.off += size
        return value

    def u32(self) -> int:
        return self._take("I", 4)

    def u64(self) -> int:
        return self._take("Q", 8)

    def raw_string(self) -> bytes:
        n = self.u64()
        if n > self.end - self.off:
            raise _Truncated if n < 1 << 32 else _Bad(f"string length {n} at byte {self.off}")
        start = self.off
        self.off += n
        return self.buf[start : self.off]

    def string(self) -> str:
        return self.raw_string().decode("utf-8", "replace")

    def value(self, vtype: int) -> Any:
        if vtype in _SCALARS:
            return self._take(*_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            return self.array(keep=_KEEP_ARRAY)
        raise _Bad(f"unknown value type {vtype} at byte {self.off - 4}")

    def array(self, keep: int, raw_strings: bool = False) -> Any:
        """Read an array; return it whole if ``len <= keep``, else skip it and return ``ArrayInfo``."""
        etype = self.u32()
        n = self.u64()
        remaining = self.end - self.off
        if etype in _SCALARS:
            fmt, size = _SCALARS[etype]
            if n * size > remaining:
                raise _Truncated if n < 1 << 40 else _Bad(f"array length {n}")
            if n > keep:
                self.off += n * size
                return ArrayInfo(_TYPE_NAMES[etype], n)
            values = struct.unpack_from(f"{self.e}{n}{fmt}", self.buf, self.off)
            self.off += n * size
            return list(values)
        if etype == _STRING:
            if n * 8 > remaining:
                raise _Truncated if n < 1 << 40 else _Bad(f"array length {n}")
            if n > keep:
                self._skip_strings(n)
                return ArrayInfo("string", n)
            return [self.raw_string() if raw_strings else self.string() for _ in range(n)]
        if etype == _ARRAY:
            if n * 12 > remaining:
                raise _Truncated
            items = [self.array(keep) for _ in range(n)]
            return items if n <= keep else ArrayInfo("array", n)
        raise _Bad(f"unknown array element type {etype} at byte {self.off - 12}")

    def _skip_strings(self, n: int) -> None:
        # Hot loop for 151k merges: locals, no per-item method calls.
        buf, off, end = self.buf, self.off, self.end
        fmt = struct.Struct(self.e + "Q")
        unpack = fmt.unpack_from
        for _ in range(n):
            if off + 8 > end:
                raise _Truncated
            (length,) = unpack(buf, off)
            off += 8 + length
        if off > end:
            raise _Truncated
        self.off = off

    def token_array(self) -> tuple[ArrayInfo, list[bytes]]:
        """The vocabulary as bytes per id, for special-token lookup (read once, not kept)."""
        etype = self.u32()
        n = self.u64()
        if etype != _STRING:
            raise _Bad("tokenizer.ggml.tokens is not an array of strings")
        if n * 8 > self.end - self.off:
            raise _Truncated if n < 1 << 40 else _Bad(f"array length {n}")
        buf, off, end = self.buf, self.off, self.end
        unpack = struct.Struct(self.e + "Q").unpack_from
        out: list[bytes] = []
        append = out.append
        for _ in range(n):
            if off + 8 > end:
                raise _Truncated
            (length,) = unpack(buf, off)
            off += 8
            if off + length > end:
                raise _Truncated
            append(buf[off : off + length])
            off += length
        self.off = off
        return ArrayInfo("string", n), out


def _corrupt(path: Path, reason: str) -> ModelCorrupt:
    return ModelCorrupt(
        f"{path} is not a usable GGUF model ({reason}): download it again "
        "(`fimble models pull NAME --force`) or import a good copy"
    )


def _parse(path: Path, buf: mmap.mmap | bytes) -> GGUFInfo:
    if len(buf) < 24:
        raise _corrupt(path, f"only {len(buf)} bytes, too short for a GGUF header")
    if buf[:4] != MAGIC:
        raise _corrupt(path, f"no GGUF magic, starts with {bytes(buf[:4])!r}")
    (version,) = struct.unpack_from("<I", buf, 4)
    endian = "<"
    if version not in (2, 3):
        (swapped,) = struct.unpack_from(">I", buf, 4)
        if swapped in (2, 3):
            endian, version = ">", swapped
        elif version == 1:
            raise _corrupt(path, "GGUF v1 is obsolete; convert it with a current llama.cpp")
        else:
            raise _corrupt(path, f"unknown GGUF version {version}")
    r = _Reader(buf, endian)
    r.off = 8
    metadata: dict[str, Any] = {}
    tokens: list[bytes] | None = None
    token_types: list[int] | None = None
    try:
        tensor_count = r.u64()
        kv_count = r.u64()
        if kv_count > _MAX_KV:
            raise _Bad(f"implausible metadata count {kv_count}")
        for _ in range(kv_count):
            key = r.string()
            vtype = r.u32()
            if key == "tokenizer.ggml.tokens" and vtype == _ARRAY:
                metadata[key], tokens = r.token_array()
            elif key == "tokenizer.ggml.token_type" and vtype == _ARRAY:
                value = r.array(keep=1 << 62)
                token_types = value if isinstance(value, list) else None
                metadata[key] = ArrayInfo("int32", len(value)) if token_types is not None else value
            else:
                metadata[key] = r.value(vtype)
    except _Truncated:
        raise _corrupt(path, f"file ends inside the metadata at byte {r.end}; truncated download?") from None
    except _Bad as err:
        raise _corrupt(path, f"garbage in the metadata: {err}") from None

    special: dict[int, str] = {}
    if tokens is not None and token_types is not None and len(token_types) == len(tokens):
        special = {
            i: tokens[i].decode("utf-8", "replace")
            for i, t in enumerate(token_types)
            if t in (_CONTROL, _USER_DEFINED)
        }
    fim = detect_fim_tokens(metadata, tokens)
    for i in fim.ids().values():
        if tokens is not None and i not in special:
            special[i] = tokens[i].decode("utf-8", "replace")
    return GGUFInfo(
        path=path,
        version=version,
        tensor_count=tensor_count,
        metadata=metadata,
        special_tokens=dict(sorted(special.items())),
        fim=fim,
    )


def read_gguf(path: str | Path) -> GGUFInfo:
    """Parse the header and metadata of ``path`` (never the tensors).

    Raises ``ModelCorrupt`` for an empty, truncated or non-GGUF file. ``OSError`` (missing or
    unreadable file) passes through: the caller knows which model name to put in the message.
    """
    p = Path(path)
    with open(p, "rb") as fh:
        size = fh.seek(0, 2)
        if size == 0:
            raise _corrupt(p, "the file is empty")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            return _parse(p, mm)
