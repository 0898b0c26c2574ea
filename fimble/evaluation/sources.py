"""Real code to evaluate on: a repository on disk, or a project's source distribution from PyPI.

Evaluating on code written for the purpose flatters a model (it is short, regular and self-contained),
so ``fimble eval --pypi requests==2.32.3`` fetches the project's sdist once with pip (the only
network use, at the user's request) into ``$FIMBLE_HOME/eval-sources`` and evaluates on that.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

from fimble import paths
from fimble.errors import InputError

__all__ = ["LANGUAGES", "fetch_sdist", "pick_language", "source_files", "sources_root"]

# ``--language``: each choice is the indexer languages whose lines are sampled (TypeScript with TSX).
LANGUAGES: dict[str, frozenset[str]] = {
    "python": frozenset({"python"}),
    "typescript": frozenset({"typescript", "tsx"}),
    "javascript": frozenset({"javascript"}),
}

_SPEC = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*==[A-Za-z0-9.!+_-]+$")
_SKIP_DIRS = {".git", ".hg", ".tox", ".venv", "venv", "node_modules", "build", "dist", "__pycache__"}
_MAX_BYTES = 256 * 1024


def sources_root() -> Path:
    return paths.cache_root() / "eval-sources"


def _unpack(archive: Path, dest: Path) -> None:
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(tmp)
    else:
        with tarfile.open(archive) as tf:
            tf.extractall(tmp, filter="data")
    inner = [p for p in tmp.iterdir()]
    top = inner[0] if len(inner) == 1 and inner[0].is_dir() else tmp
    os.replace(top, dest)
    shutil.rmtree(tmp, ignore_errors=True)


def fetch_sdist(spec: str, cache: Path | None = None) -> Path:
    """The unpacked sdist of ``NAME==VERSION`` (downloaded with pip on first use, then cached).

    Raises ``InputError`` for a spec without an exact version (results must be reproducible) or when
    pip cannot fetch it, naming what to do.
    """
    if not _SPEC.match(spec):
        raise InputError(f"--pypi wants NAME==VERSION (an exact version), got {spec!r}")
    name, version = spec.split("==")
    root = cache or sources_root()
    dest = root / f"{name.lower()}-{version}"
    if dest.is_dir():
        return dest
    downloads = root / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps"]
    cmd += ["--disable-pip-version-check", "-q", "-d", str(downloads), spec]
    archives = _find_archive(downloads, name, version)
    if archives is None:
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        archives = _find_archive(downloads, name, version)
        if archives is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no archive"]
            raise InputError(
                f"could not download the sdist of {spec} ({tail[0]}); check the name and version on "
                "pypi.org and that PyPI is reachable, or pass a folder: fimble eval PATH"
            )
    _unpack(archives, dest)
    return dest


def _find_archive(folder: Path, name: str, version: str) -> Path | None:
    norm = re.sub(r"[-_.]+", "[-_.]", re.escape(name.lower()).replace("\\", ""))
    pattern = re.compile(rf"^{norm}-{re.escape(version)}\.(tar\.gz|tgz|zip|tar\.bz2)$", re.IGNORECASE)
    for p in folder.iterdir():
        if pattern.match(p.name):
            return p
    return None


def source_files(root: Path, languages: frozenset[str] = frozenset({"python"})) -> list[tuple[str, str]]:
    """(workspace-relative path, text) of the code files under ``root`` in ``languages``, sorted.

    Skips what the index skips anyway (VCS and build folders, virtualenvs) and files over 256 KiB.
    """
    from fimble.indexer.languages import detect_language

    if not root.is_dir():
        raise InputError(f"{root} is not a folder; pass the folder of a project to evaluate on")
    out: list[tuple[str, str]] = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for name in sorted(files):
            path = Path(folder) / name
            rel = path.relative_to(root).as_posix()
            try:
                if path.stat().st_size > _MAX_BYTES:
                    continue
                head = path.read_bytes()
                if detect_language(rel, head[:256]) not in languages:
                    continue
                out.append((rel, head.decode("utf-8").replace("\r\n", "\n")))
            except (OSError, UnicodeDecodeError):
                continue
    return out


def pick_language(root: Path, choice: str = "auto") -> str:
    """``choice``, or with ``"auto"`` the language of ``LANGUAGES`` with the most files under
    ``root`` (Python on a tie or when there is none: the sdists ``--pypi`` fetches)."""
    if choice != "auto":
        if choice not in LANGUAGES:
            raise InputError(f"--language wants auto or one of {', '.join(LANGUAGES)}, got {choice!r}")
        return choice
    from fimble.indexer.languages import detect_language

    counts = dict.fromkeys(LANGUAGES, 0)
    for _folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")]
        for name in files:
            found = detect_language(name)
            for choice_name, members in LANGUAGES.items():
                counts[choice_name] += found in members
    best = max(counts, key=lambda k: (counts[k], k == "python"))
    return best if counts[best] else "python"
