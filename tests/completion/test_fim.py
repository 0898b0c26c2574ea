"""Prompt assembly as token ids, with a character-level fake tokenizer (no model needed)."""

from __future__ import annotations

import pytest

from fimble.completion.prompt.fim import FimTokens, build_prompt, detect_fim
from fimble.errors import ModelUnsupported

# A fake vocabulary: control tokens get ids >= 1000, text is tokenized one character per token.
QWEN_VOCAB = {
    "<|fim_prefix|>": 151659,
    "<|fim_middle|>": 151660,
    "<|fim_suffix|>": 151661,
    "<|fim_pad|>": 151662,
    "<|repo_name|>": 151663,
    "<|file_sep|>": 151664,
    "<|endoftext|>": 151643,
    "<|im_end|>": 151645,
}


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def text_of(tokens: list[int], fim: FimTokens) -> str:
    names = {v: k for k, v in QWEN_VOCAB.items()}
    return "".join(names.get(t, chr(t)) if t >= 1000 and t in names else chr(t) for t in tokens)


def test_detect_qwen() -> None:
    fim = detect_fim(QWEN_VOCAB, eog=frozenset({151643}))
    assert fim.family == "qwen"
    assert (fim.prefix, fim.suffix, fim.middle) == (151659, 151661, 151660)
    assert fim.repo_level
    assert {151643, 151662, 151664, 151645} <= fim.stop


@pytest.mark.parametrize(
    ("vocab", "family"),
    [
        (
            {
                "<fim_prefix>": 1,
                "<fim_suffix>": 2,
                "<fim_middle>": 3,
                "<fim_pad>": 4,
                "<file_sep>": 5,
                "<repo_name>": 6,
            },
            "starcoder",
        ),
        ({"<fim_prefix>": 1, "<fim_suffix>": 2, "<fim_middle>": 3, "<reponame>": 6}, "starcoder"),
        ({"▁<PRE>": 32007, "▁<SUF>": 32008, "▁<MID>": 32009, "▁<EOT>": 32010}, "codellama"),
        ({"<｜fim▁begin｜>": 1, "<｜fim▁hole｜>": 2, "<｜fim▁end｜>": 3}, "deepseek"),
        (
            {"<|fim_prefix|>": 1, "<|fim_suffix|>": 2, "<|fim_middle|>": 3, "<|file_separator|>": 4},
            "codegemma",
        ),
    ],
)
def test_detect_families(vocab: dict[str, int], family: str) -> None:
    assert detect_fim(vocab).family == family


def test_codellama_eot_stops() -> None:
    fim = detect_fim({"▁<PRE>": 1, "▁<SUF>": 2, "▁<MID>": 3, "▁<EOT>": 4})
    assert 4 in fim.stop
    assert not fim.repo_level


def test_model_without_fim_is_refused_naming_tokens() -> None:
    with pytest.raises(ModelUnsupported, match=r"<\|fim_prefix\|>"):
        detect_fim({"<|endoftext|>": 0, "<|im_start|>": 1})


QWEN = detect_fim(QWEN_VOCAB)


def test_layout_is_prefix_suffix_middle() -> None:
    prompt = build_prompt(chars, QWEN, "a\nb\n    x = fo", "o(1)\nc\n")
    toks = prompt.tokens
    pre, suf, mid = toks.index(QWEN.prefix), toks.index(QWEN.suffix), toks.index(QWEN.middle)
    assert pre == 0 and pre < suf < mid == len(toks) - 1
    assert "".join(map(chr, toks[pre + 1 : suf])) == "a\nb\n    x = fo"
    assert "".join(map(chr, toks[suf + 1 : mid])) == "o(1)\nc\n"


def test_typing_on_a_line_changes_only_the_end_of_the_prefix() -> None:
    before = build_prompt(chars, QWEN, "def f():\n    ret", "\n").tokens
    after = build_prompt(chars, QWEN, "def f():\n    retu", "\n").tokens
    cut = before.index(QWEN.suffix)
    assert after[:cut] == before[:cut]
    assert after[cut + 1 :] == before[cut:]  # the suffix and middle are the same run, one position on


def test_control_token_text_in_file_stays_text() -> None:
    # The tokenizer is called with file text only; control tokens appear exactly once each.
    prompt = build_prompt(chars, QWEN, "s = '<|endoftext|><|fim_middle|>'\n", "")
    toks = prompt.tokens
    assert toks.count(QWEN.middle) == 1
    assert QWEN_VOCAB["<|endoftext|>"] not in toks


def test_repo_level_layout_puts_files_first() -> None:
    prompt = build_prompt(
        chars,
        QWEN,
        "import util\nutil.",
        "\n",
        path="app.py",
        repo="demo",
        files=[("util.py", "def helper(): ...", "imported")],
    )
    kinds = [p.kind for p in prompt.parts]
    assert kinds == ["repo", "context", "path", "prefix", "suffix", "middle"]
    assert prompt.parts[-1].tokens == (QWEN.middle,)
    ctx = prompt.parts[1]
    assert ctx.tokens[0] == QWEN.file_sep
    assert "".join(map(chr, ctx.tokens[1:])) == "util.py\ndef helper(): ...\n"
    assert ctx.reason == "imported"


def test_prefix_budget_cuts_whole_lines_from_the_top() -> None:
    prefix = "".join(f"line{i}\n" for i in range(100)) + "cur"
    prompt = build_prompt(chars, QWEN, prefix, "", prefix_budget=30)
    kept = "".join(map(chr, prompt.parts[0].tokens[1:]))
    assert len(kept) <= 30
    assert kept.endswith("line99\ncur")
    assert kept.startswith("line")  # a whole line, never a fragment


def test_prefix_top_moves_in_anchor_steps_not_on_every_new_line() -> None:
    def top(n_lines: int) -> str:
        prefix = "".join(f"l{i:03d}\n" for i in range(n_lines)) + "x"
        kept = "".join(map(chr, build_prompt(chars, QWEN, prefix, "", prefix_budget=400).parts[0].tokens[1:]))
        return kept.split("\n", 1)[0]

    tops = {top(n) for n in range(200, 216)}  # sixteen Enter presses
    assert len(tops) <= 2
    assert all(t.startswith("l") for t in tops)


def test_a_small_prompt_keeps_its_start_line_when_asked_further_down() -> None:
    """A small prompt (few lines) moves its top one line per line typed; asking for the start of
    the earlier prompt keeps its head, token for token, while those lines fit the budget."""
    text = "".join(f"l{i:03d}\n" for i in range(300))

    def prompt_at(line: int, budget: int, start: int | None = None):  # type: ignore[no-untyped-def]
        return build_prompt(chars, QWEN, text[: 5 * line] + "x", "", prefix_budget=budget, prefix_start=start)

    first = prompt_at(200, 30)
    assert first.prefix_line == 195 and "".join(map(chr, first.parts[0].tokens[1:6])) == "l195\n"
    assert prompt_at(201, 30).prefix_line != first.prefix_line  # the default moves with the cursor
    later = prompt_at(203, 400, start=first.prefix_line)
    assert later.prefix_line == 195
    head = first.parts[0].tokens[:-1]  # the cursor's line ("x") is where they part
    assert later.parts[0].tokens[: len(head)] == head
    assert prompt_at(203, 30, start=195).prefix_line != 195  # does not fit: the budget decides
    assert prompt_at(190, 30, start=195).prefix_line < 190  # below the cursor: ignored


def test_suffix_budget_cuts_whole_lines_from_the_bottom() -> None:
    suffix = "".join(f"s{i}\n" for i in range(100))
    prompt = build_prompt(chars, QWEN, "x", suffix, suffix_budget=10)
    kept = "".join(map(chr, prompt.parts[1].tokens[1:]))
    assert kept == "s0\ns1\ns2\n"


def test_context_files_are_packed_best_first_and_laid_out_best_last() -> None:
    files = [("a.py", "a" * 10, "first"), ("b.py", "b" * 50, "too big"), ("c.py", "c" * 10, "third")]
    prompt = build_prompt(chars, QWEN, "x", "", path="m.py", files=files, context_budget=40)
    reasons = [p.reason for p in prompt.parts if p.kind == "context"]
    assert reasons == ["third", "first"]  # the best chunk sits right before the current file
