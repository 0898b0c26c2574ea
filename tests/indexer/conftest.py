"""Fixtures for indexer tests: a multi-language workspace and an index of it, all under tmp_path.

The static sources live in ``fixtures/workspace`` (definitions, cross-file imports in eight languages,
nested .gitignore files). Everything git would not keep or that must be generated is added here:
secrets, a binary file, invalid UTF-8, a symlink loop, a link out of the workspace, a 5 MB file,
and folders the indexer must skip (node_modules, .git, a virtualenv, build/dist output).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from fimble.indexer import IndexConfig, WorkspaceIndex

FIXTURES = Path(__file__).parent / "fixtures"
WORKSPACE = FIXTURES / "workspace"

# Secret files and the one word each contains: that word must never be searchable.
SECRETS = {
    ".env": "zqdotenv",
    "config/.env.production": "zqenvprod",
    "certs/server.pem": "zqpemfile",
    "deploy/deploy.key": "zqkeyfile",
    "home/id_rsa": "zqidrsa",
    "home/id_rsa.pub": "zqidrsapub",
    "credentials.json": "zqcredentials",
    "certs/store.p12": "zqpkcs",
    "sub/nested/.env.local": "zqenvlocal",
}

# Matched by the fixture's own .gitignore files (so git would not keep them either): generated here.
GITIGNORED = {
    "debug.log": "ignored log zqignoredlog\n",
    "generated.txt": "anchored ignore zqanchored\n",
    "sub/skip.gen": "ignored because of *.gen zqskipgen\n",
    "sub/scratch.tmp": "ignored by *.tmp zqscratch\n",
}

SKIPPED_DIRS = {
    "node_modules/leftpad/index.js": "function nodeModulesOnly() {}\n",
    ".git/config": "[core]\n\trepositoryformatversion = 0\n",
    "venv_here/pyvenv.cfg": "home = /usr/bin\n",
    "venv_here/lib/site.py": "def venv_only_function(): pass\n",
    "build/out.py": "def build_output_function(): pass\n",
    "dist/bundle.js": "function distOnly() {}\n",
    "pyproj/__pycache__/models.cpython-311.py": "def pycache_only(): pass\n",
    "build-out/gen.py": "def gitignored_build_out(): pass\n",
}


def write(root: Path, rel: str, content: str | bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def make_workspace(root: Path, outside: Path) -> Path:
    """Copy the static fixture and add the generated files; ``outside`` is a folder beside it."""
    shutil.copytree(WORKSPACE, root)
    for rel, word in SECRETS.items():
        write(root, rel, f"SECRET_VALUE = {word}\n")
    for rel, text in {**GITIGNORED, **SKIPPED_DIRS}.items():
        write(root, rel, text)
    # The .gitignore negation must not leak a secret back in.
    write(root, "sub/nested/.gitignore", "!.env.local\n!*.pem\n")
    write(root, "data/blob.txt", b"binary\x00\x01\x02 content zqbinaryword\n" * 10)
    write(root, "pyproj/latin1.py", b"# caf\xe9 au lait \xff\xfe\ndef latin_function(x):\n    return x\n")
    write(root, "big/huge.py", ("# filler line to make a big file\n" * 170_000) + "def huge_only(): pass\n")
    (root / "loop").mkdir()
    os.symlink("..", root / "loop" / "again")  # loop/again -> the workspace root
    os.symlink("sub", root / "sub_alias")  # an in-workspace alias: indexed once only
    write(outside, "stolen.py", "def outside_secret_function(): pass\n")
    os.symlink(outside, root / "outside_link")
    os.symlink(outside / "stolen.py", root / "stolen_link.py")
    return root


@pytest.fixture(autouse=True)
def fimble_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own cache root: nothing touches the real user cache."""
    home = tmp_path / "fimble-home"
    monkeypatch.setenv("FIMBLE_HOME", str(home))
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws", tmp_path / "outside")


@pytest.fixture
def config() -> IndexConfig:
    """Small batches and no process pool: fast, deterministic tests."""
    return IndexConfig(workers=0, batch_seconds=0.05, debounce_seconds=0.05)


@pytest.fixture
def index(workspace: Path, config: IndexConfig) -> Iterator[WorkspaceIndex]:
    ix = WorkspaceIndex.open(workspace, config)
    try:
        ix.build()
        yield ix
    finally:
        ix.close()
