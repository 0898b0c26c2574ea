"""Language detection and per-language facts (data/languages.toml)."""

from __future__ import annotations

import pytest

from fimble.indexer.languages import TEXT, detect_language, language_spec


@pytest.mark.parametrize(
    ("name", "head", "language"),
    [
        ("a.py", b"", "python"),
        ("a.pyi", b"", "python"),
        ("x/y.mjs", b"", "javascript"),
        ("c.JSX", b"", "javascript"),
        ("t.ts", b"", "typescript"),
        ("t.tsx", b"", "tsx"),
        ("main.go", b"", "go"),
        ("lib.rs", b"", "rust"),
        ("App.java", b"", "java"),
        ("u.c", b"", "c"),
        ("u.h", b"int f(void);\n", "c"),
        ("u.h", b"#pragma once\nnamespace geo {\n", "cpp"),
        ("u.h", b"template <typename T>\nT f();\n", "cpp"),
        ("s.cpp", b"", "cpp"),
        ("s.hpp", b"", "cpp"),
        ("README.md", b"", TEXT),
        ("Makefile", b"", TEXT),
        ("tool", b"#!/usr/bin/env python3\nprint(1)\n", "python"),
        ("tool", b"#!/usr/bin/python3.11\n", "python"),
        ("run", b"#!/usr/bin/env node\n", "javascript"),
        ("run", b"#!/bin/sh\n", TEXT),
    ],
)
def test_detect(name: str, head: bytes, language: str) -> None:
    assert detect_language(name, head) == language


def test_specs_come_from_data() -> None:
    python = language_spec("python")
    assert python is not None and python.queries == ("python.scm",) and "self" in python.keywords
    assert language_spec("cpp").separator == "::" and language_spec("go").separator == "."
    assert language_spec(TEXT) is None
