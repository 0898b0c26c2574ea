"""Plans for client-rendered prompts: prompt building, stops, streaming hold-back, budgets."""

from __future__ import annotations

import pytest

from fimble.completion import raw_requests
from fimble.completion.context.imports import ImportChoices
from fimble.completion.prompt.fim import FimPrompt, FimTokens
from fimble.completion.prompt.heal import HealGuide
from fimble.completion.prompt.raw_prompt import RawPrompt
from fimble.completion.raw_requests import GenerationOptions, plan_request, stop_string_hit, stop_string_hold
from tests.fakes import FakeEngine

FIM = FimTokens(family="qwen", prefix=-1, suffix=-2, middle=-3, repo_name=-4, file_sep=-5)


class CharEngine:
    """Tokenizes one character per token; enough for layout and budget tests."""

    fim = FIM

    def __init__(self, n_ctx: int = 4096) -> None:
        self.n_ctx = n_ctx

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return [ord(c) for c in text]


def render(tokens: list[int] | FimPrompt) -> str:
    if isinstance(tokens, FimPrompt):
        tokens = tokens.tokens
    names = {-1: "<PRE>", -2: "<SUF>", -3: "<MID>", -4: "<REPO>", -5: "<SEP>"}
    return "".join(names.get(t) or chr(t) for t in tokens)


def test_fim_plan_builds_the_trained_layout_from_ids() -> None:
    raw = RawPrompt(prefix="x = ", suffix="\n", fim=True, path="app.py", files=(("u.py", "U = 1\n", "s"),))
    plan = plan_request(raw, GenerationOptions(max_tokens=8))
    assert (
        render(plan.build(CharEngine()))
        == "<REPO>workspace\n<SEP>u.py\nU = 1\n<SEP>app.py\n<PRE>x = <SUF>\n<MID>"
    )
    assert plan.fim and plan.path == "app.py" and plan.info["files_used"] == 1
    built = plan.build(CharEngine())
    assert isinstance(built, FimPrompt) and render(built.tokens[: built.stable_len]).endswith("<SEP>app.py\n")


def test_import_choices_among_the_files_guide_the_line_and_stay_out_of_the_prompt() -> None:
    choices = ImportChoices({"pkg.cache": ("Bucket",)})
    files = (("u.py", "U = 1\n", "s"), choices.as_snippet("app.py"))
    raw = RawPrompt(prefix="import os\nfrom ", suffix="\n", fim=True, path="app.py", files=files)
    plan = plan_request(raw, GenerationOptions(max_tokens=8))
    assert "pkg.cache" not in render(plan.build(CharEngine()))
    assert plan.context_files == 1 and plan.info["files_used"] == 1
    assert plan.guide is not None and plan.guide.typed == "from "
    other = plan_request(RawPrompt(prefix="x = ", suffix="\n", fim=True, files=files), GenerationOptions())
    assert other.guide is None  # not an import line


def test_text_plan_tokenizes_plain_text_and_keeps_the_end_when_too_long() -> None:
    plan = plan_request(RawPrompt(prefix="abcdefghij"), GenerationOptions(max_tokens=2))
    assert render(plan.build(CharEngine(n_ctx=14))) == "ghij"  # 14 - 2 (max_tokens) - 8 (margin)
    assert plan.info["truncated"] is True


def test_empty_text_prompt_still_has_a_token() -> None:
    plan = plan_request(RawPrompt(prefix=""), GenerationOptions(max_tokens=2))
    assert plan.build(CharEngine()) == [ord("\n")]


def test_context_files_that_do_not_fit_are_dropped_oldest_first() -> None:
    files = tuple((f"f{i}.py", "x" * 1000 + "\n", "s") for i in range(6))
    raw = RawPrompt(prefix="a", suffix="b", fim=True, files=files)
    plan = plan_request(raw, GenerationOptions(max_tokens=64, prefix_budget=1000, suffix_budget=200))
    tokens = plan.build(CharEngine(n_ctx=4096))
    assert isinstance(tokens, FimPrompt)
    assert len(tokens) < 4096 - 64
    assert plan.info["files_dropped"] == 4
    assert "f5.py" in render(tokens) and "f0.py" not in render(tokens)


def test_small_context_shrinks_the_budgets() -> None:
    raw = RawPrompt(prefix="p" * 5000, suffix="s" * 5000, fim=True)
    plan = plan_request(raw, GenerationOptions(max_tokens=100))
    assert len(plan.build(CharEngine(n_ctx=1024))) < 1024 - 100
    assert plan.info["truncated"] is True


def test_stop_strings() -> None:
    assert stop_string_hit("abc<END>d", ["<END>", "c<"]) == ("stop_string", 2)
    assert stop_string_hit("abc", ["x"]) is None
    assert stop_string_hold("abc<EN", ["<END>"]) == 3
    assert stop_string_hold("abc", ["<END>"]) == 0


def test_fim_plan_combines_client_stops_with_fimble_rules() -> None:
    raw = RawPrompt(prefix="def f():\n    ", suffix="\n", fim=True)
    plan = plan_request(raw, GenerationOptions(stop=("<END>",)))
    assert plan.multiline
    # The model writes the cursor line's indentation (``prompt.heal``); the rules judge what follows.
    assert plan.stop("    return 1<END>") == ("stop_string", 12)
    assert plan.stop("    return 1\nprint(2)\n") == ("stop_rule:indent", 12)
    assert plan.final("    return 1   ") == "return 1"


def test_fim_plan_leaves_the_cursor_lines_indentation_to_the_model() -> None:
    raw = RawPrompt(prefix="def f():\n    ", suffix="\n", fim=True)
    plan = plan_request(raw, GenerationOptions())
    tokens = plan.build(FakeEngine())
    assert isinstance(tokens, FimPrompt)
    prefix = next(p for p in tokens.parts if p.kind == "prefix")
    assert "".join(map(chr, prefix.tokens[1:])).endswith("def f():\n")
    assert isinstance(plan.guide, HealGuide) and plan.guide.inner is None
    assert plan.stop("  x") == ("indent", 0)  # one level out: not the line at the cursor
    assert plan.final("") == "" and plan.shown("   ") == ""


def test_single_line_plan_holds_back_what_may_overlap_the_line_suffix() -> None:
    raw = RawPrompt(prefix="x = max(", suffix=")\n", fim=True)
    plan = plan_request(raw, GenerationOptions())
    assert not plan.multiline
    assert plan.shown("a, b)") == "a, b"  # the ")" may be trimmed as a repeat of the suffix
    assert plan.final("a, b)") == "a, b"


def test_multiline_streams_whole_lines_only() -> None:
    raw = RawPrompt(prefix="def f():\n    ", suffix="\n", fim=True)
    plan = plan_request(raw, GenerationOptions(stop=("<E",)))
    assert plan.shown("    x = 1") == ""  # at a line start: until its first line says how it is indented
    assert plan.shown("    x = 1\n    y") == "x = 1"
    assert plan.shown("    x = 1\n    y = 2\n") == "x = 1\n    y = 2"


@pytest.mark.parametrize(
    ("prefix", "suffix", "raw"),
    [
        # A tab more than the cursor has, at a line start: fitted at the end, so held until then.
        ("function f() {\n\tconst a = 1;\n\t", "\n\treturn a;\n}\n", "\t\tconsole.log(a);"),
        # A CRLF file: what is streamed has the file's line ends, as the final text does.
        ("def f():\r\n    ", "\r\n", "    x = 1\n    y = 2\n    return x\n"),
        ("def f():\r\n    ", "\r\n", "    x = 1\r\n    y = 2\r\n    return x\r\n"),
    ],
)
def test_what_is_streamed_is_always_the_start_of_the_final_text(prefix: str, suffix: str, raw: str) -> None:
    plan = plan_request(RawPrompt(prefix=prefix, suffix=suffix, fim=True), GenerationOptions())
    final = plan.final(raw)
    for n in range(len(raw) + 1):
        assert final.startswith(plan.shown(raw[:n])), (raw[:n], plan.shown(raw[:n]), final)


def test_n_indent_stops_at_a_less_indented_line() -> None:
    plan = plan_request(RawPrompt(prefix="if x:\n    a"), GenerationOptions(n_indent=4))
    assert plan.stop("bc\n    d\nprint(1)") == ("stop_rule:n_indent", 8)


def test_time_limit_binds_once_a_line_is_complete(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 5.0, 5.0])
    monkeypatch.setattr(raw_requests.time, "monotonic", lambda: next(clock))
    plan = plan_request(RawPrompt(prefix="a"), GenerationOptions(t_max_predict_ms=100))
    assert plan.stop("b") is None  # starts the clock
    assert plan.stop("bc") is None  # over time, but no line is complete
    assert plan.stop("bc\nd") == ("time_limit", 4)
