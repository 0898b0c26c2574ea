from __future__ import annotations

from pathlib import Path

import pytest

from fimble.errors import ModelUnsupported
from fimble.models.fim_tokens import FimTokens, detect_fim_tokens
from fimble.models.gguf import read_gguf
from tests.models.helpers import I32, U32, tiny_model_gguf


def _tokens(*specials: str) -> list[bytes]:
    return [f"t{i}".encode() for i in range(10)] + [s.encode() for s in specials]


QWEN = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"]
STARCODER = ["<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<fim_pad>", "<reponame>", "<file_sep>"]
CODEGEMMA = ["<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>", "<|file_separator|>"]
ALL6 = {"pad": 13, "repo": 14, "file_sep": 15}
PSM = {"prefix": 10, "suffix": 11, "middle": 12}


@pytest.mark.parametrize(
    "family, specials, expected",
    [
        ("qwen", QWEN, PSM | ALL6),
        ("starcoder", STARCODER, {"prefix": 10, "middle": 11, "suffix": 12} | ALL6),
        ("codellama", ["▁<PRE>", "▁<SUF>", "▁<MID>", "▁<EOT>"], PSM | {"eot": 13}),
        ("codellama", ["<PRE>", "<SUF>", "<MID>"], PSM),
        ("deepseek", ["<｜fim▁begin｜>", "<｜fim▁hole｜>", "<｜fim▁end｜>"], PSM),
        ("codegemma", CODEGEMMA, PSM | {"file_sep": 13}),
    ],
)
def test_vocabulary_spellings_per_family(family: str, specials: list[str], expected: dict[str, int]) -> None:
    fim = detect_fim_tokens({}, _tokens(*specials))
    assert fim.family == family
    assert fim.ids() == expected
    assert fim.complete
    assert fim.texts["prefix"] == specials[0]


def test_metadata_ids_win_and_fill_gaps() -> None:
    meta = {
        "tokenizer.ggml.fim_pre_token_id": 3,
        "tokenizer.ggml.fim_sep_token_id": 4,
        "tokenizer.ggml.middle_token_id": 5,  # deprecated key still honoured
        "tokenizer.ggml.fim_pad_token_id": 10_000,  # out of range: ignored
    }
    fim = detect_fim_tokens(meta, _tokens("<|fim_prefix|>", "<|fim_suffix|>", "<|fim_middle|>"))
    assert fim.ids() == {"prefix": 3, "suffix": 11, "middle": 5, "file_sep": 4}


def test_metadata_only_without_vocabulary() -> None:
    meta = {f"tokenizer.ggml.fim_{k}_token_id": v for k, v in (("pre", 1), ("suf", 2), ("mid", 3))}
    fim = detect_fim_tokens(meta, None)
    assert fim.complete and fim.family is None and fim.texts == {}


def test_no_fim_tokens_is_unsupported() -> None:
    fim = detect_fim_tokens({}, _tokens("<s>", "</s>"))
    assert not fim.complete
    assert fim.missing == ["prefix", "suffix", "middle"]
    with pytest.raises(ModelUnsupported, match=r"prefix, suffix, middle missing.*fimble models pull"):
        fim.require("tiny")
    assert FimTokens(prefix=1, suffix=2, middle=3).require() is not None


def test_reader_uses_metadata_keys(tmp_path: Path) -> None:
    extra = [("tokenizer.ggml.fim_pre_token_id", U32, 1), ("tokenizer.ggml.fim_suf_token_id", I32, 2),
             ("tokenizer.ggml.fim_mid_token_id", U32, 3)]  # fmt: skip
    path = tmp_path / "m.gguf"
    path.write_bytes(tiny_model_gguf("none", extra=extra))
    fim = read_gguf(path).fim
    assert (fim.prefix, fim.suffix, fim.middle) == (1, 2, 3)
    assert fim.texts["prefix"] == "tok1"
