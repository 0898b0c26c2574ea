"""Helix, Emacs and Zed setups in editors/ stay valid, and Zed's requests work against fimble.

Helix's languages.toml and Zed's settings.json are parsed and checked for what fimble needs. Zed is
not run; the requests its edit-prediction providers build from settings.json (body and URL as in
Zed's source: ``open_ai_compatible_api`` posts to ``api_url``, ``ollama`` to ``{api_url}/api/generate``,
both with a FIM prompt in ``prompt_format``) are sent to a live fimble HTTP server with the real
model. fimble.el is byte-compiled by Emacs when Emacs is installed.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

EDITORS = Path(__file__).parents[2] / "editors"
# The FIM prompt Zed renders for prompt_format "qwen" and the stop strings it sends with it.
PREFIX = (
    'import datetime as dt\n\n\ndef parse_dates(rows):\n    """Turn (year, month, day) rows into dates."""\n'
)
PREFIX += "    dates = []\n    for year, month, day in rows:\n        dates.append("
SUFFIX = ")\n    return dates\n"
ZED_STOPS = [
    "<|endoftext|>", "<|file_separator|>", "<|fim_pad|>", "<|fim_prefix|>", "<|fim_middle|>",
    "<|fim_suffix|>", "<fim_prefix>", "<fim_middle>", "<fim_suffix>", "<PRE>", "<SUF>", "<MID>",
    "[PREFIX]", "[SUFFIX]",
]  # fmt: skip


def _zed() -> dict:
    return json.loads((EDITORS / "zed" / "settings.json").read_text())


def test_helix_languages_toml() -> None:
    config = tomllib.loads((EDITORS / "helix" / "languages.toml").read_text())
    server = config["language-server"]["fimble"]
    assert server["command"] == "fimble" and server["args"] == ["serve"]
    known = {"multiline", "maxTokens", "deadlineMs", "model", "threads", "completionFallback"}
    assert set(server["config"]) <= known
    assert server["config"].get("completionFallback") == "always"  # Helix shows no ghost text
    languages = config["language"]
    assert languages and all("fimble" in lang["language-servers"] for lang in languages)
    # A language's list replaces Helix's default servers: fimble comes after the usual one.
    assert all(lang["language-servers"][-1] == "fimble" for lang in languages)
    assert all(len(lang["language-servers"]) >= 2 for lang in languages)


def test_zed_settings_json() -> None:
    settings = _zed()["edit_predictions"]
    assert settings["provider"] == "open_ai_compatible_api"
    api = settings["open_ai_compatible_api"]
    url = urlsplit(api["api_url"])
    assert (url.scheme, url.hostname, url.port, url.path) == ("http", "127.0.0.1", 8080, "/v1/completions")
    assert api["prompt_format"] == "qwen" and 0 < api["max_output_tokens"] <= 256
    assert "settings.json" in (EDITORS / "zed" / "README.md").read_text()


def test_emacs_file_byte_compiles(tmp_path: Path) -> None:
    emacs = shutil.which("emacs")
    if emacs is None:
        pytest.skip("emacs is not installed (apt-get install emacs-nox)")
    # Emacs 28 has no eglot built in (and none can be fetched here): a stand-in that defines only
    # what fimble.el touches still checks that the file compiles cleanly and registers fimble.
    has_eglot = subprocess.run(
        [emacs, "--batch", "-Q", "--eval", "(kill-emacs (if (require 'eglot nil t) 0 1))"], timeout=60
    )
    stub = "" if has_eglot.returncode == 0 else "(progn (defvar eglot-server-programs nil) (provide 'eglot))"
    el = tmp_path / "fimble.el"
    shutil.copyfile(EDITORS / "emacs" / "fimble.el", el)
    strict = f"(progn {stub} (setq byte-compile-error-on-warn t))"
    proc = subprocess.run(
        [emacs, "--batch", "-Q", "--eval", strict, "-f", "batch-byte-compile", str(el)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and (tmp_path / "fimble.elc").exists(), proc.stderr
    # Loading it registers fimble for Python buffers in eglot.
    member = "(lambda (k m) (if (listp k) (memq m k) (eq k m)))"
    check = f'(progn {stub} (load "{el}") (prin1 (assoc (quote python-mode) eglot-server-programs {member})))'
    proc = subprocess.run(
        [emacs, "--batch", "-Q", "--eval", check], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0 and '"fimble" "serve"' in proc.stdout, proc.stdout + proc.stderr
    assert ':completionFallback "always"' in proc.stdout, proc.stdout


@pytest.fixture(scope="module")
def served() -> Iterator[object]:
    from tests.server.http.conftest import serve_model

    yield from serve_model()


@pytest.mark.model
def test_zed_openai_compatible_request(served: object) -> None:
    api = _zed()["edit_predictions"]["open_ai_compatible_api"]
    body = {  # Zed's RawCompletionRequest
        "model": api["model"],
        "prompt": f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        "max_tokens": api["max_output_tokens"],
        "temperature": None,
        "stop": ZED_STOPS,
        "environment": None,
    }
    with served.client() as client:  # type: ignore[attr-defined]
        response = client.post(urlsplit(api["api_url"]).path, json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert isinstance(data["id"], str) and data["id"]
    text = data["choices"][0]["text"]
    assert text.strip() and "<|" not in text, data
    assert "\n" not in text.rstrip("\n"), data  # a mid-line completion: one line


@pytest.mark.model
def test_zed_ollama_request(served: object) -> None:
    body = {  # Zed's OllamaGenerateRequest
        "model": _zed()["edit_predictions"]["open_ai_compatible_api"]["model"],
        "prompt": f"<|fim_prefix|>{PREFIX}<|fim_suffix|>{SUFFIX}<|fim_middle|>",
        "raw": True,
        "stream": False,
        "options": {"num_predict": 64, "temperature": 0.2, "stop": ZED_STOPS},
    }
    with served.client() as client:  # type: ignore[attr-defined]
        response = client.post("/api/generate", json=body)
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["response"].strip() and "<|" not in data["response"], data
    assert isinstance(data["created_at"], str), data
