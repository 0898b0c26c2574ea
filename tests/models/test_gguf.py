from __future__ import annotations

import struct
from pathlib import Path

import pytest

from fimble.errors import ModelCorrupt
from fimble.models.gguf import ArrayInfo, read_gguf
from tests.models.helpers import (
    ARR,
    BOOL,
    F32,
    F64,
    I8,
    I16,
    I32,
    I64,
    STR,
    U8,
    U16,
    U32,
    U64,
    gguf_bytes,
    tiny_model_gguf,
)


def _write(tmp_path: Path, data: bytes, name: str = "m.gguf") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


ALL_TYPES = [
    ("t.u8", U8, 200),
    ("t.i8", I8, -5),
    ("t.u16", U16, 60000),
    ("t.i16", I16, -30000),
    ("t.u32", U32, 4_000_000_000),
    ("t.i32", I32, -2_000_000_000),
    ("t.f32", F32, 0.5),
    ("t.bool", BOOL, True),
    ("t.str", STR, "héllo"),
    ("t.u64", U64, 2**63 + 5),
    ("t.i64", I64, -(2**62)),
    ("t.f64", F64, 1.25),
    ("t.arr_i32", ARR, (I32, [1, -2, 3])),
    ("t.arr_str", ARR, (STR, ["a", "bc", ""])),
    ("t.arr_nested", ARR, (ARR, [(U8, [1, 2]), (U8, [3])])),
    ("t.arr_empty", ARR, (F32, [])),
    ("t.arr_long", ARR, (U16, list(range(1000)))),
    ("t.arr_long_str", ARR, (STR, [str(i) for i in range(500)])),
]


@pytest.mark.parametrize("endian", ["<", ">"])
@pytest.mark.parametrize("version", [2, 3])
def test_reads_every_value_type(tmp_path: Path, endian: str, version: int) -> None:
    info = read_gguf(_write(tmp_path, gguf_bytes(ALL_TYPES, version=version, endian=endian, tensor_count=7)))
    md = info.metadata
    assert info.version == version and info.tensor_count == 7
    for key in ("t.u8", "t.i8", "t.u16", "t.i16", "t.u32", "t.i32", "t.bool", "t.str", "t.u64", "t.i64"):
        expected = next(v for k, _t, v in ALL_TYPES if k == key)
        assert md[key] == expected, key
    assert md["t.f32"] == pytest.approx(0.5) and md["t.f64"] == 1.25
    assert md["t.arr_i32"] == [1, -2, 3]
    assert md["t.arr_str"] == ["a", "bc", ""]
    assert md["t.arr_nested"] == [[1, 2], [3]]
    assert md["t.arr_empty"] == []
    assert md["t.arr_long"] == ArrayInfo("uint16", 1000)
    assert md["t.arr_long_str"] == ArrayInfo("string", 500)


def test_model_facts_special_and_fim_tokens(tmp_path: Path) -> None:
    info = read_gguf(_write(tmp_path, tiny_model_gguf("qwen")))
    assert info.architecture == "qwen2"
    assert info.name == "Tiny Test"
    assert info.context_length == 4096
    assert info.quantization == "Q4_K_M"
    assert info.vocab_size == 207
    assert info.block_count == 4
    assert info.token_id("eos") == 200
    assert info.special_tokens[200] == "<|endoftext|>"
    assert info.special_tokens[201] == "<|fim_prefix|>"
    assert len(info.special_tokens) == 7
    fim = info.fim
    assert (fim.prefix, fim.suffix, fim.middle, fim.pad, fim.repo, fim.file_sep) == (
        201,
        202,
        203,
        204,
        205,
        206,
    )
    assert fim.family == "qwen" and fim.complete
    # 4 layers * n_ctx * 2 kv heads * (16 + 16) * 2 bytes
    assert info.kv_cache_bytes(100) == 4 * 100 * 2 * 32 * 2
    summary = info.summary()
    assert summary["fim_tokens"]["middle"] == 203 and summary["quantization"] == "Q4_K_M"


def test_unknown_file_type_and_missing_arch_keys(tmp_path: Path) -> None:
    info = read_gguf(_write(tmp_path, gguf_bytes([("general.file_type", U32, 99)])))
    assert info.quantization == "type 99"
    assert info.architecture is None and info.context_length is None
    assert info.kv_cache_bytes(10) is None
    assert not info.fim.complete


def test_truncated_at_every_offset_raises_model_corrupt(tmp_path: Path) -> None:
    data = tiny_model_gguf("qwen", n_plain=20)
    for cut in list(range(0, 64)) + list(range(64, len(data), 7)):
        path = _write(tmp_path, data[:cut])
        with pytest.raises(ModelCorrupt) as err:
            read_gguf(path)
        assert str(path) in str(err.value) and "pull" in str(err.value)
    read_gguf(_write(tmp_path, data))  # the whole thing is fine


@pytest.mark.parametrize(
    "data, message",
    [
        (b"", "empty"),
        (b"PK\x03\x04" + b"\0" * 40, "no GGUF magic"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "v1"),
        (b"GGUF" + struct.pack("<IQQ", 77, 0, 0), "version 77"),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 2**40), "metadata count"),
        (
            b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 3) + b"abc" + struct.pack("<I", 42),
            "type 42",
        ),
        (b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 2**60) + b"abc", "string length"),
    ],
)
def test_garbage_raises_model_corrupt(tmp_path: Path, data: bytes, message: str) -> None:
    with pytest.raises(ModelCorrupt, match=message):
        read_gguf(_write(tmp_path, data))


def test_huge_array_count_is_rejected_without_looping(tmp_path: Path) -> None:
    data = gguf_bytes([("a", STR, "x")])
    bogus = (
        b"GGUF"
        + struct.pack("<IQQ", 3, 0, 1)
        + struct.pack("<Q", 1)
        + b"k"
        + struct.pack("<IIQ", ARR, STR, 2**61)
    )
    with pytest.raises(ModelCorrupt):
        read_gguf(_write(tmp_path, bogus + data))


def test_large_vocabulary(tmp_path: Path) -> None:
    """A 151k-token vocabulary like Qwen's (timing is measured in bench, never asserted here)."""
    tokens = [f"t{i}" for i in range(151_643)] + ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"]
    kv = [
        ("general.architecture", STR, "qwen2"),
        ("tokenizer.ggml.tokens", ARR, (STR, tokens)),
        ("tokenizer.ggml.token_type", ARR, (I32, [1] * 151_643 + [3, 3, 3])),
        ("tokenizer.ggml.merges", ARR, (STR, [f"a b{i}" for i in range(151_000)])),
    ]
    info = read_gguf(_write(tmp_path, gguf_bytes(kv)))
    assert info.vocab_size == 151_646
    assert (info.fim.prefix, info.fim.suffix, info.fim.middle) == (151_643, 151_644, 151_645)
    assert info.metadata["tokenizer.ggml.merges"] == ArrayInfo("string", 151_000)
