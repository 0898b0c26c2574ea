"""What the indexer must not look at: default skips, secrets, user excludes and ``.gitignore`` files.

Order of decisions for a workspace-relative path, first hit wins:

1. secrets (``data/defaults.toml`` [secrets] + ``IndexConfig.deny``): never indexed, and nothing can
   re-include them: a negation in a ``.gitignore`` must not leak an ``.env`` into a prompt;
2. default skips (VCS, dependency, cache and build directories, virtualenvs found by their marker
   file, lock files and minified bundles) and ``IndexConfig.exclude``;
3. ``.gitignore`` files at every level plus ``.git/info/exclude``, with git's precedence: the deepest
   file that has an opinion decides, within a file the last matching pattern decides, and nothing
   inside an excluded directory can be re-included (the walker never enters it).

``.gitignore`` files are loaded lazily per directory and cached; ``forget()`` drops the cache when one
changes (the watcher calls it).
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import threading
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import pathspec

__all__ = ["Defaults", "IgnoreRules", "defaults", "is_secret_name"]


@dataclass(frozen=True, slots=True)
class Defaults:
    """The skip lists of ``data/defaults.toml``."""

    dirs: tuple[str, ...]
    env_markers: tuple[str, ...]
    files: tuple[str, ...]
    binary_extensions: frozenset[str]
    secrets: tuple[str, ...]


@functools.cache
def defaults() -> Defaults:
    raw = tomllib.loads(resources.files("fimble.indexer.data").joinpath("defaults.toml").read_text("utf-8"))
    skip, secrets = raw["skip"], raw["secrets"]
    return Defaults(
        dirs=tuple(skip["dirs"]),
        env_markers=tuple(skip["env_markers"]),
        files=tuple(skip["files"]),
        binary_extensions=frozenset(ext.lower() for ext in skip["binary_extensions"]),
        secrets=tuple(secrets["names"]),
    )


@functools.cache
def _secret_names() -> re.Pattern[str] | None:
    return _name_matcher(defaults().secrets, ignore_case=True)


def is_secret_name(path: str) -> bool:
    """True when the file name of ``path`` is on the default secrets list (``.env``, keys,
    credentials): for callers that hold a path outside any workspace's rules (an editor buffer)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    matcher = _secret_names()
    return matcher is not None and matcher.match(name) is not None


def _name_matcher(patterns: tuple[str, ...], *, ignore_case: bool) -> re.Pattern[str] | None:
    """One regex for many file-name globs (``fnmatch`` per pattern per file is too slow for big trees)."""
    if not patterns:
        return None
    flags = re.IGNORECASE if ignore_case else 0
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in patterns), flags)


def _spec(lines: list[str]) -> pathspec.GitIgnoreSpec | None:
    lines = [line for line in lines if line.strip() and not line.lstrip().startswith("#")]
    return pathspec.GitIgnoreSpec.from_lines(lines) if lines else None


class IgnoreRules:
    """Decides, for paths relative to ``root``, whether the indexer may read them."""

    def __init__(
        self,
        root: Path,
        *,
        exclude: tuple[str, ...] = (),
        deny: tuple[str, ...] = (),
        use_gitignore: bool = True,
    ) -> None:
        base = defaults()
        self.root = root
        self._use_gitignore = use_gitignore
        self._secret_names = _name_matcher(base.secrets, ignore_case=True)
        self._skip_dirs = _name_matcher(base.dirs, ignore_case=False)
        self._skip_files = _name_matcher(base.files, ignore_case=False)
        self._env_markers = base.env_markers
        self._binary = base.binary_extensions
        self._deny = _spec(list(deny))
        self._exclude = _spec(list(exclude))
        self._lock = threading.Lock()
        self._gitignores: dict[str, pathspec.GitIgnoreSpec | None] = {}

    # -- secrets and defaults ------------------------------------------------------------------

    def is_secret(self, rel: str) -> bool:
        """True for files whose contents must never be indexed (checked on the name and full path)."""
        name = rel.rsplit("/", 1)[-1]
        if self._secret_names is not None and self._secret_names.match(name):
            return True
        return self._deny is not None and self._deny.match_file(rel)

    def is_binary_name(self, rel: str) -> bool:
        dot = rel.rfind(".")
        return dot > rel.rfind("/") and rel[dot:].lower() in self._binary

    def skip_dir(self, rel: str, abs_path: str) -> bool:
        """Directories never entered: defaults, virtualenvs, user excludes, secrets, .gitignore."""
        name = rel.rsplit("/", 1)[-1]
        if self._skip_dirs is not None and self._skip_dirs.match(name):
            return True
        if self._deny is not None and self._deny.match_file(rel + "/"):
            return True
        if self._exclude is not None and self._exclude.match_file(rel + "/"):
            return True
        if any(os.path.exists(os.path.join(abs_path, marker)) for marker in self._env_markers):
            return True
        return self._gitignored(rel, is_dir=True)

    def skip_file(self, rel: str) -> bool:
        """Files not indexed (secrets included), assuming their directory was allowed."""
        if self.is_secret(rel) or self.is_binary_name(rel):
            return True
        name = rel.rsplit("/", 1)[-1]
        if self._skip_files is not None and self._skip_files.match(name):
            return True
        if self._exclude is not None and self._exclude.match_file(rel):
            return True
        return self._gitignored(rel, is_dir=False)

    def allowed(self, rel: str) -> bool:
        """Full check for one file outside a walk (buffer pushes, watcher events): every ancestor
        directory must be allowed too."""
        if not rel or rel.startswith("../") or rel == "..":
            return False
        parts = rel.split("/")
        for depth in range(1, len(parts)):
            sub = "/".join(parts[:depth])
            if self.skip_dir(sub, os.path.join(self.root, *parts[:depth])):
                return False
        return not self.skip_file(rel)

    # -- .gitignore ------------------------------------------------------------------------------

    def forget(self, rel_dir: str | None = None) -> None:
        """Drop cached .gitignore specs (all, or one directory's) after one changed."""
        with self._lock:
            if rel_dir is None:
                self._gitignores.clear()
            else:
                self._gitignores.pop(rel_dir, None)

    def _load(self, rel_dir: str) -> pathspec.GitIgnoreSpec | None:
        with self._lock:
            if rel_dir in self._gitignores:
                return self._gitignores[rel_dir]
        directory = self.root / rel_dir if rel_dir else self.root
        lines: list[str] = []
        sources = [directory / ".gitignore"]
        if not rel_dir:
            sources.insert(0, self.root / ".git" / "info" / "exclude")
        for source in sources:
            try:
                lines += source.read_text("utf-8", "replace").splitlines()
            except OSError:
                continue
        spec = _spec(lines)
        with self._lock:
            self._gitignores[rel_dir] = spec
        return spec

    def _gitignored(self, rel: str, *, is_dir: bool) -> bool:
        if not self._use_gitignore:
            return False
        parts = rel.split("/")
        # Deepest .gitignore first: the first one with a verdict decides.
        for depth in range(len(parts) - 1, -1, -1):
            spec = self._load("/".join(parts[:depth]))
            if spec is None:
                continue
            sub = "/".join(parts[depth:]) + ("/" if is_dir else "")
            verdict = spec.check_file(sub).include
            if verdict is not None:
                return bool(verdict)
        return False
