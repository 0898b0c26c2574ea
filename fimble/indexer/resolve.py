"""Which workspace files an import points at.

Resolution runs when ``imports_of`` is asked, against the files the index holds at that moment, so it
never goes stale: a file added after its importer was indexed resolves at once, and a deleted one stops
resolving, without reparsing anything. Each rule costs a handful of key lookups.

Rules (best effort; anything outside the workspace resolves to nothing):

* Python: relative imports from the importer's package; absolute ones from the importer's package
  root (the parent of its topmost ``__init__.py`` directory), the workspace root, ``src/`` and, for a
  script outside a package, its directory. ``from X import name`` prefers the submodule ``X/name.py``.
* JavaScript/TypeScript: relative specifiers with the usual extensions and ``index`` files, and
  ``./x.js`` written for ``./x.ts`` (ESM TypeScript); ``@/`` and ``~/`` aliases map to ``src/``.
* Go: import paths inside a module declared by a ``go.mod`` in the workspace, to that package's files.
* Rust: ``mod x;`` to ``x.rs``/``x/mod.rs``; ``crate::``/``self::``/``super::`` paths to module files.
* Java: fully qualified classes by their path suffix (``com/acme/App.java``).
* C/C++: quoted and angle includes relative to the importer, the root, ``include/``, then by path
  suffix anywhere, nearest to the importer first.
"""

from __future__ import annotations

import posixpath
from typing import Protocol

__all__ = ["FileLookup", "resolve"]

_JS_EXTS = (".ts", ".tsx", ".d.ts", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".json", ".vue", ".svelte")
_JS_TO_TS = {".js": (".ts", ".tsx"), ".jsx": (".tsx",), ".mjs": (".mts",), ".cjs": (".cts",)}
_RUST_MOD_FILES = ("mod.rs", "lib.rs", "main.rs")


class FileLookup(Protocol):
    """The index's view of the workspace, as the resolver needs it (paths are workspace-relative)."""

    def exists(self, rel: str) -> bool: ...

    def in_dir(self, rel_dir: str) -> list[str]: ...

    def by_basename(self, name: str) -> list[str]: ...

    def go_modules(self) -> list[tuple[str, str]]: ...


def resolve(
    language: str,
    importer: str,
    flavor: str,
    spec: str,
    names: tuple[str, ...],
    wildcard: bool,
    files: FileLookup,
) -> tuple[str, ...]:
    """Workspace files the import refers to, most specific first; empty when external or unknown."""
    if language == "python":
        return _python(importer, flavor, spec, names, files)
    if language in ("javascript", "typescript", "tsx"):
        return _javascript(importer, spec, files)
    if language == "go":
        return _go(spec, files)
    if language == "rust":
        return _rust(importer, flavor, spec, files)
    if language == "java":
        return () if wildcard else _java(spec, files)
    if language in ("c", "cpp"):
        return _include(importer, spec, files)
    return ()


def _dir(rel: str) -> str:
    return posixpath.dirname(rel)


def _join(*parts: str) -> str:
    return posixpath.normpath(posixpath.join(*[p for p in parts if p])) if any(parts) else ""


def _first(files: FileLookup, candidates: list[str]) -> str | None:
    for candidate in candidates:
        if candidate and not candidate.startswith("../") and files.exists(candidate):
            return candidate
    return None


# -- Python --------------------------------------------------------------------------------------


def _py_module(files: FileLookup, base: str, parts: list[str]) -> str | None:
    stem = _join(base, *parts)
    if not parts:
        return _first(files, [_join(stem, "__init__.py"), _join(stem, "__init__.pyi")])
    return _first(
        files, [stem + ".py", _join(stem, "__init__.py"), stem + ".pyi", _join(stem, "__init__.pyi")]
    )


def _package_root(importer: str, files: FileLookup) -> str:
    here = _dir(importer)
    while here and files.exists(_join(here, "__init__.py")):
        here = _dir(here)
    return here


def _python(
    importer: str, flavor: str, spec: str, names: tuple[str, ...], files: FileLookup
) -> tuple[str, ...]:
    here = _dir(importer)
    if spec.startswith("."):
        level = len(spec) - len(spec.lstrip("."))
        base = here
        for _ in range(level - 1):
            if not base:
                return ()
            base = _dir(base)
        rest = spec[level:]
        bases = [base]
        parts = rest.split(".") if rest else []
    else:
        parts = spec.split(".")
        # A script's own directory is on sys.path; a package module's is not (Python 3 has no
        # implicit relative imports: ``import typing`` in flask/ctx.py is the standard library's).
        script_dir = [] if files.exists(_join(here, "__init__.py")) else [here]
        bases = list(dict.fromkeys([_package_root(importer, files), "", "src", *script_dir]))
    for base in bases:
        module = _py_module(files, base, parts) if parts or spec.startswith(".") else None
        subs = [s for n in (names if flavor == "from" else ()) if (s := _py_module(files, base, [*parts, n]))]
        if subs:
            bound_from_module = len(subs) < len(names)
            return tuple(dict.fromkeys([*subs, *([module] if module and bound_from_module else [])]))
        if module:
            return (module,)
    return ()


# -- JavaScript / TypeScript ---------------------------------------------------------------------


def _javascript(importer: str, spec: str, files: FileLookup) -> tuple[str, ...]:
    if spec.startswith(("./", "../")) or spec in (".", ".."):
        stem = _join(_dir(importer), spec)
    elif spec.startswith(("@/", "~/")):
        stem = _join("src", spec[2:])
    else:
        return ()
    if stem.startswith("../") or stem == "..":
        return ()
    candidates = [stem, *(stem + ext for ext in _JS_EXTS)]
    root, ext = posixpath.splitext(stem)
    candidates += [root + alt for alt in _JS_TO_TS.get(ext, ())]
    candidates += [_join(stem, "index" + ext) for ext in _JS_EXTS]
    found = _first(files, candidates)
    return (found,) if found else ()


# -- Go --------------------------------------------------------------------------------------------


def _go(spec: str, files: FileLookup) -> tuple[str, ...]:
    for mod_dir, module in sorted(files.go_modules(), key=lambda m: -len(m[1])):
        if spec == module or spec.startswith(module + "/"):
            package_dir = _join(mod_dir, spec[len(module) + 1 :])
            listed = sorted(files.in_dir(package_dir))
            return tuple(f for f in listed if f.endswith(".go") and not f.endswith("_test.go"))
    return ()


# -- Rust ------------------------------------------------------------------------------------------


def _rust_module_dir(importer: str) -> str:
    here = _dir(importer)
    name = posixpath.basename(importer)
    return here if name in _RUST_MOD_FILES else _join(here, name[:-3] if name.endswith(".rs") else name)


def _crate_root(importer: str, files: FileLookup) -> str:
    here = _dir(importer)
    while True:
        if files.exists(_join(here, "lib.rs")) or files.exists(_join(here, "main.rs")):
            return here
        if not here:
            return _dir(importer)
        here = _dir(here)


def _rust(importer: str, flavor: str, spec: str, files: FileLookup) -> tuple[str, ...]:
    if flavor == "mod":
        base = _rust_module_dir(importer)
        found = _first(files, [_join(base, spec + ".rs"), _join(base, spec, "mod.rs")])
        return (found,) if found else ()
    parts = spec.split("::")
    head, rest = parts[0], parts[1:]
    if head == "crate":
        bases = [_crate_root(importer, files)]
    elif head == "self":
        bases = [_rust_module_dir(importer)]
    elif head == "super":
        bases = [_dir(_rust_module_dir(importer))]
        while rest and rest[0] == "super":
            bases, rest = [_dir(bases[0])], rest[1:]
    else:  # 2015-style path from the crate root, or an external crate (resolves to nothing)
        bases, rest = [_crate_root(importer, files)], parts
    for base in bases:
        for n in range(len(rest), 0, -1):
            found = _first(files, [_join(base, *rest[:n]) + ".rs", _join(base, *rest[:n], "mod.rs")])
            if found:
                return (found,)
    return ()


# -- Java and C/C++: by path suffix ---------------------------------------------------------------


def _by_suffix(files: FileLookup, suffix: str, near: str) -> list[str]:
    name = posixpath.basename(suffix)
    hits = [f for f in files.by_basename(name) if f == suffix or f.endswith("/" + suffix)]
    return sorted(hits, key=lambda f: (-len(posixpath.commonprefix([f, near])), len(f), f))


def _java(spec: str, files: FileLookup) -> tuple[str, ...]:
    parts = spec.split(".")
    for n in range(len(parts), 1, -1):  # `import static a.B.member` and nested classes: drop the tail
        hits = _by_suffix(files, "/".join(parts[:n]) + ".java", "")
        if hits:
            return (hits[0],)
    return ()


def _include(importer: str, spec: str, files: FileLookup) -> tuple[str, ...]:
    found = _first(files, [_join(_dir(importer), spec), _join(spec), _join("include", spec)])
    if found:
        return (found,)
    hits = _by_suffix(files, posixpath.normpath(spec).lstrip("./"), importer)
    return (hits[0],) if hits else ()
