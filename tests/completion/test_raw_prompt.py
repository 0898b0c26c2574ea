"""Parsing client-rendered prompts back into files, path, prefix and suffix."""

from __future__ import annotations

import pytest

from fimble.completion.prompt.raw_prompt import RawPrompt, parse_prompt, split_continue_snippets

# What Continue's qwenCoderFimTemplate + formatSnippets render (core/autocomplete/templating).
CONTINUE_TS = (
    "<|fim_prefix|>// Path: src/util.ts\n"
    "// export function add(a: number, b: number) {\n"
    "//   return a + b;\n"
    "// }\n"
    "// \n"
    "// Path: src/types.ts\n"
    "// export type N = number;\n"
    "// src/app.ts\n"
    "import { add } from './util';\n"
    "const total = add(<|fim_suffix|>);\n"
    "console.log(total);\n"
    "<|fim_middle|>"
)


def test_continue_snippets_become_files_and_the_last_line_the_path() -> None:
    raw = parse_prompt(CONTINUE_TS)
    assert raw.fim and raw.family == "qwen"
    assert raw.path == "src/app.ts"
    assert raw.files == (
        (
            "src/util.ts",
            "export function add(a: number, b: number) {\n  return a + b;\n}\n\n",
            "client snippet",
        ),
        ("src/types.ts", "export type N = number;\n", "client snippet"),
    )
    assert raw.prefix == "import { add } from './util';\nconst total = add("
    assert raw.suffix == ");\nconsole.log(total);\n"


def test_continue_without_snippets_still_names_the_file() -> None:
    raw = parse_prompt("<|fim_prefix|>\n# pkg/app.py\ndef main(<|fim_suffix|>\n<|fim_middle|>")
    assert raw == RawPrompt(prefix="def main(", suffix="\n", fim=True, path="pkg/app.py", family="qwen")


def test_python_comment_marks() -> None:
    files, path, rest = split_continue_snippets("# Path: a/b.py\n# X = 1\n# c/d.py\nimport os\n")
    assert files == [("a/b.py", "X = 1\n", "client snippet")]
    assert path == "c/d.py"
    assert rest == "import os\n"


@pytest.mark.parametrize(
    "prefix",
    [
        "#!/usr/bin/env python\n# Copyright 2024\nimport os\n",
        "\n// not a path at all\nlet x = 1;",
        "// Path without the space-separated header\nx",
        "plain code\n",
        "",
    ],
)
def test_prefixes_without_a_continue_block_are_unchanged(prefix: str) -> None:
    assert split_continue_snippets(prefix) == ([], None, prefix)


def test_a_real_header_comment_after_the_block_stays_in_the_prefix() -> None:
    files, path, rest = split_continue_snippets("// Path: u.ts\n// a\n// app.ts\n// TODO: fix this\nlet x")
    assert path == "app.ts" and files == [("u.ts", "a\n", "client snippet")]
    assert rest == "// TODO: fix this\nlet x"


def test_repo_level_qwen_prompt() -> None:
    prompt = (
        "<|repo_name|>proj\n<|file_sep|>lib/a.py\nA = 1\n\n<|file_sep|>lib/b.py\nB = 2\n"
        "<|file_sep|>app.py\n<|fim_prefix|>x = <|fim_suffix|>\nprint(x)\n<|fim_middle|>"
    )
    raw = parse_prompt(prompt)
    assert raw.repo == "proj" and raw.path == "app.py"
    assert raw.files == (("lib/a.py", "A = 1\n", "client context"), ("lib/b.py", "B = 2", "client context"))
    assert (raw.prefix, raw.suffix) == ("x = ", "\nprint(x)\n")


def test_control_token_text_inside_the_code_does_not_confuse_the_split() -> None:
    raw = parse_prompt("<|fim_prefix|>s = '<|fim_middle|>'<|fim_suffix|>\n<|fim_middle|>")
    assert raw.prefix == "s = '<|fim_middle|>'" and raw.suffix == "\n"


def test_text_after_the_middle_marker_is_the_start_of_the_middle() -> None:
    raw = parse_prompt("<|fim_prefix|>def f():\n<|fim_suffix|>\n<|fim_middle|>    return")
    assert raw.prefix == "def f():\n    return"


@pytest.mark.parametrize(
    ("prompt", "family"),
    [
        ("<fim_prefix>a = <fim_suffix>\n<fim_middle>", "starcoder"),
        ("<｜fim▁begin｜>a = <｜fim▁hole｜>\n<｜fim▁end｜>", "deepseek"),
        ("<PRE> a =  <SUF>\n <MID>", "codellama"),
        ("<fim_suffix>\n<fim_prefix>a = <fim_middle>", "starcoder"),  # suffix-prefix-middle
    ],
)
def test_other_fim_formats(prompt: str, family: str) -> None:
    raw = parse_prompt(prompt)
    assert raw.family == family
    assert (raw.prefix, raw.suffix) == ("a = ", "\n")


def test_separate_suffix_makes_fim_and_continue_block_is_read() -> None:
    raw = parse_prompt("// Path: u.ts\n// a\n// app.ts\nconst x = ", "\n")
    assert raw.fim and raw.family is None
    assert raw.path == "app.ts" and raw.files == (("u.ts", "a\n", "client snippet"),)
    assert (raw.prefix, raw.suffix) == ("const x = ", "\n")


def test_plain_prompt() -> None:
    assert parse_prompt("Once upon a time") == RawPrompt(prefix="Once upon a time")
    assert parse_prompt("") == RawPrompt(prefix="")


@pytest.mark.parametrize("name", [".env", ".env.local", ".npmrc", "config/.env"])
def test_a_dotfile_is_a_path(name: str) -> None:
    """A dotfile is a current file too (the HTTP front door refuses ``.env`` by its path)."""
    raw = parse_prompt(f"<|repo_name|>ws\n<|file_sep|>{name}\n<|fim_prefix|>KEY=<|fim_suffix|><|fim_middle|>")
    assert raw.path == name and raw.files == ()
