"""IgnoreRules: defaults, secrets, user patterns and .gitignore precedence."""

from __future__ import annotations

from pathlib import Path

import pytest

from fimble.indexer.ignore import IgnoreRules, defaults
from tests.indexer.conftest import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    write(root, ".gitignore", "*.log\n!keep.log\nbuild-out/\n/anchored.txt\ndocs/**/*.draft\n")
    write(root, "sub/.gitignore", "*.gen\n!important.gen\n")
    write(root, "sub/deeper/.gitignore", "important.gen\n")
    write(root, ".git/info/exclude", "local-only.txt\n")
    write(root, "env2/pyvenv.cfg", "home = /usr\n")
    return root


def test_gitignore_patterns_and_negation(tree: Path) -> None:
    rules = IgnoreRules(tree)
    assert rules.skip_file("debug.log")
    assert not rules.skip_file("keep.log")
    assert rules.skip_file("sub/any.log")  # a root pattern applies below
    assert rules.skip_file("anchored.txt") and not rules.skip_file("sub/anchored.txt")
    assert rules.skip_dir("build-out", str(tree / "build-out"))
    assert rules.skip_file("docs/a/b/x.draft") and not rules.skip_file("docs/x.md")
    assert rules.skip_file("local-only.txt")  # .git/info/exclude


def test_nested_gitignore_precedence(tree: Path) -> None:
    rules = IgnoreRules(tree)
    assert rules.skip_file("sub/x.gen")
    assert not rules.skip_file("sub/important.gen")  # negated by sub/.gitignore
    assert rules.skip_file("sub/deeper/important.gen")  # re-ignored deeper: the deepest file decides
    assert not rules.skip_file("important.gen")  # sub/ rules do not apply above sub/


def test_gitignore_can_be_turned_off(tree: Path) -> None:
    assert not IgnoreRules(tree, use_gitignore=False).skip_file("debug.log")


@pytest.mark.parametrize(
    "rel",
    [
        ".env",
        ".env.local",
        "deep/.env.production",
        "server.pem",
        "tls/private.KEY",
        "id_rsa",
        "home/id_rsa.pub",
        "id_ed25519",
        "cert.p12",
        "credentials",
        "credentials.json",
        "aws/credentials.csv",
        ".netrc",
        ".npmrc",
    ],
)
def test_secrets(tree: Path, rel: str) -> None:
    rules = IgnoreRules(tree)
    assert rules.is_secret(rel) and rules.skip_file(rel) and not rules.allowed(rel)


def test_secrets_cannot_be_reincluded(tree: Path) -> None:
    write(tree, ".gitignore", "!.env\n!*.pem\n")
    rules = IgnoreRules(tree, use_gitignore=True)
    assert rules.skip_file(".env") and rules.skip_file("a.pem")


def test_user_deny_and_exclude(tree: Path) -> None:
    rules = IgnoreRules(tree, exclude=("vendor/", "*.snap"), deny=("secrets/", "*.vault"))
    assert rules.skip_dir("vendor", str(tree / "vendor"))
    assert rules.skip_file("ui/x.snap")
    assert rules.is_secret("prod.vault") and rules.skip_dir("secrets", str(tree / "secrets"))
    assert not rules.allowed("secrets/readme.md")


def test_default_skips(tree: Path) -> None:
    rules = IgnoreRules(tree)
    for name in (
        "node_modules",
        ".git",
        "__pycache__",
        "build",
        "dist",
        ".venv",
        "venv",
        "target",
        "x.egg-info",
    ):
        assert rules.skip_dir(name, str(tree / name)), name
    assert rules.skip_dir("env2", str(tree / "env2"))  # any virtualenv, found by its pyvenv.cfg
    assert rules.skip_file("app.min.js") and rules.skip_file("package-lock.json")
    assert rules.is_binary_name("img/logo.PNG") and not rules.is_binary_name("main.py")
    assert ".png" in defaults().binary_extensions


def test_allowed_checks_every_ancestor(tree: Path) -> None:
    rules = IgnoreRules(tree)
    assert rules.allowed("src/main.py")
    assert not rules.allowed("node_modules/pkg/index.js")
    assert not rules.allowed("build-out/x.py")
    assert not rules.allowed("env2/lib/site.py")
    assert not rules.allowed("../outside.py") and not rules.allowed("")


def test_forget_reloads_a_changed_gitignore(tree: Path) -> None:
    rules = IgnoreRules(tree)
    assert not rules.skip_file("notes.md")
    write(tree, ".gitignore", "notes.md\n")
    assert not rules.skip_file("notes.md")  # cached
    rules.forget()
    assert rules.skip_file("notes.md")
