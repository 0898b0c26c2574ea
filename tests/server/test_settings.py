"""Settings: raw JSON (bare or under "fimble") -> typed settings, each bad field named and defaulted."""

from __future__ import annotations

from fimble.completion.tuning import Tuning
from fimble.server.settings import Settings, merge_raw, resolve, section


def test_defaults_work_without_any_settings() -> None:
    resolved = resolve({})
    assert resolved.settings == Settings()
    assert resolved.problems == ()
    assert resolved.settings.multiline_flag is None


def test_every_field_parses_from_camel_case() -> None:
    raw = {
        "enable": False,
        "model": "qwen2.5-coder-0.5b",
        "threads": 2,
        "maxTokens": 16,
        "multiline": "never",
        "debounceMs": 75,
        "deadlineMs": 1500,
        "prefixTokens": 512,
        "suffixTokens": 64,
        "languages": {"markdown": False, "*": True},
        "index": {"exclude": ["**/vendor/**"]},
        "completionFallback": "always",
        "acceptanceLog": False,
    }
    s = resolve(raw).settings
    assert (s.enable, s.model, s.threads) == (False, "qwen2.5-coder-0.5b", 2)
    assert (s.max_tokens, s.multiline) == (16, "never")
    assert (s.debounce_ms, s.deadline_ms, s.prefix_tokens, s.suffix_tokens) == (75, 1500, 512, 64)
    assert s.index_exclude == ("**/vendor/**",)
    assert (s.completion_fallback, s.acceptance_log, s.multiline_flag) == ("always", False, False)
    assert not s.language_enabled("markdown")
    assert s.language_enabled("python")


def test_speculative_decoding_can_be_turned_off() -> None:
    assert Settings().speculative is True
    assert resolve({"speculative": False}).settings.speculative is False
    problems = resolve({"speculative": "no"}).problems
    assert problems and problems[0].startswith("fimble.speculative: expected true or false")


def test_a_bad_field_is_named_and_the_rest_still_applies() -> None:
    resolved = resolve({"maxTokens": "lots", "debounceMs": 50, "multiline": "sometimes", "threads": True})
    assert resolved.settings.debounce_ms == 50
    assert resolved.settings.max_tokens == Settings().max_tokens
    assert resolved.settings.multiline == "auto"
    assert len(resolved.problems) == 3
    assert any(p.startswith("fimble.maxTokens: expected an integer") for p in resolved.problems)
    assert any(p.startswith("fimble.multiline: expected one of") for p in resolved.problems)
    assert any(p.startswith("fimble.threads:") for p in resolved.problems)


def test_unknown_and_misshapen_keys_are_reported() -> None:
    problems = resolve({"maxTokenz": 3, "index": {"exclud": []}, "languages": ["python"]}).problems
    assert "fimble.maxTokenz: unknown setting, ignored" in problems
    assert "fimble.index.exclud: unknown setting, ignored" in problems
    assert any(p.startswith("fimble.languages: expected an object") for p in problems)


def test_integral_floats_are_integers_and_ranges_hold() -> None:
    assert resolve({"maxTokens": 32.0}).settings.max_tokens == 32
    assert resolve({"maxTokens": 0}).problems
    assert resolve({"deadlineMs": 10**9}).problems


def test_section_accepts_bare_or_namespaced_payloads() -> None:
    assert section({"fimble": {"maxTokens": 8}}) == {"maxTokens": 8}
    assert section({"maxTokens": 8}) == {"maxTokens": 8}
    assert section(None) == {}
    assert section("nonsense") == {}


def test_merge_keeps_earlier_values_and_merges_nested_objects() -> None:
    merged = merge_raw({"maxTokens": 8, "index": {"exclude": ["a"]}}, {"debounceMs": 5, "index": {}})
    assert merged == {"maxTokens": 8, "debounceMs": 5, "index": {"exclude": ["a"]}}


def test_a_connections_tuning_comes_from_its_settings() -> None:
    s = resolve({"speculative": False, "firstSuggestionMs": 0, "firstPromptTokens": 100}).settings
    assert s.tuning == Tuning(speculative=False, first_ms=0, first_tokens=100)
    assert Settings().tuning == Tuning()  # the defaults agree
