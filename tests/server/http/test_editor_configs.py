"""The editor setup files in editors/ stay valid: Continue's config.yaml parses, uses only keys
Continue's config schema knows, and points every provider at fimble's endpoints."""

from __future__ import annotations

from pathlib import Path

import yaml

EDITORS = Path(__file__).parents[3] / "editors"

# packages/config-yaml/src/schemas/models.ts (autocompleteOptionsSchema, baseModelFields).
AUTOCOMPLETE_KEYS = {
    "disable", "maxPromptTokens", "debounceDelay", "modelTimeout", "maxSuffixPercentage",
    "prefixPercentage", "transform", "template", "onlyMyCode", "useCache", "useImports",
    "useRecentlyEdited", "useRecentlyOpened", "experimental_includeClipboard",
    "experimental_includeRecentlyVisitedRanges", "experimental_includeRecentlyEditedRanges",
    "experimental_includeDiff", "experimental_enableStaticContextualization",
}  # fmt: skip
MODEL_KEYS = {
    "name", "provider", "model", "apiKey", "apiBase", "roles", "defaultCompletionOptions",
    "autocompleteOptions", "useLegacyCompletionsEndpoint", "requestOptions",
}  # fmt: skip


def test_continue_config_yaml() -> None:
    config = yaml.safe_load((EDITORS / "continue" / "config.yaml").read_text())
    assert config["schema"] == "v1"
    models = {m["provider"]: m for m in config["models"]}
    assert set(models) == {"ollama", "llama.cpp", "openai"}
    for model in models.values():
        assert set(model) <= MODEL_KEYS
        assert set(model["autocompleteOptions"]) <= AUTOCOMPLETE_KEYS
        assert model["roles"] == ["autocomplete"]
        assert "qwen" in model["model"] and "coder" in model["model"]  # Continue's Qwen FIM template
        assert model["autocompleteOptions"]["modelTimeout"] >= 2000  # CPU speeds
        assert model["apiBase"].startswith("http://127.0.0.1:8080")
    assert models["openai"]["apiBase"].endswith("/v1/") and models["openai"]["useLegacyCompletionsEndpoint"]


def test_editor_readmes_exist() -> None:
    assert "config.yaml" in (EDITORS / "continue" / "README.md").read_text()
    assert "/infill" in (EDITORS / "llama.vim" / "README.md").read_text()
