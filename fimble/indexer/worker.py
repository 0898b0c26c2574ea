"""Per-file analysis: read, sniff, hash, parse, tokenise. Runs in pool processes or the writer thread.

Everything a file contributes to the index is computed here, as plain picklable values, so the writer
thread only has to put bytes into LMDB. Pool processes are niced: indexing must lose every fight for
the CPU against a completion.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass

from fimble.indexer import terms
from fimble.indexer.languages import TEXT, detect_language, language_spec
from fimble.indexer.records import dumps

__all__ = [
    "FileDoc",
    "Remove",
    "Skip",
    "Task",
    "Touch",
    "WorkerConfig",
    "analyze_bytes",
    "analyze_group",
    "analyze_path",
    "init_worker",
]

log = logging.getLogger(__name__)

_SNIFF = 8192
_GO_MODULE = re.compile(rb"^\s*module\s+\"?([^\s\"]+)", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    max_file_bytes: int
    stride: int
    block_bytes: int


@dataclass(frozen=True, slots=True)
class Task:
    """A file to look at; ``old_digest`` lets an unchanged file skip parsing after a touch."""

    rel: str
    path: str
    old_digest: bytes | None


@dataclass(slots=True)
class FileDoc:
    """Everything one file puts in the index (records.py says where each part goes)."""

    rel: str
    size: int
    mtime_ns: int
    digest: bytes
    language: str
    data: bytes
    n_lines: int
    definitions: list[bytes]  # each a DefRecord as stored (records.dumps), in file order
    def_names: list[bytes]  # each definition's name as a key of the ``names`` table
    imports: list[tuple]
    blocks: bytes  # the stored list of (start_line, end_line, start_byte, end_byte)
    n_blocks: int
    hashes: bytes  # postings as parallel arrays, see lexical.Lexical
    entry_blocks: bytes
    tfs: bytes
    block_lengths: bytes
    total_length: int
    has_errors: bool
    module: str | None


@dataclass(frozen=True, slots=True)
class Touch:
    """Same content, new stat: only the size/mtime pre-check needs updating."""

    rel: str
    size: int
    mtime_ns: int


@dataclass(frozen=True, slots=True)
class Skip:
    """Not indexable (binary, too large, unreadable, gone): remembered so a re-run need not reopen
    it while its size and mtime stay the same; removed from the index if it was there."""

    rel: str
    reason: str
    size: int = 0
    mtime_ns: int = 0


@dataclass(frozen=True, slots=True)
class Remove:
    rel: str


Result = FileDoc | Touch | Skip

_config: WorkerConfig | None = None


def init_worker(config: WorkerConfig, nice: int = 10, parent: int | None = None) -> None:
    """Pool initializer: remember the config, lower priority, keep stdout clean (LSP over stdio),
    and leave when the parent (pid ``parent``) dies."""
    global _config
    _config = config
    _exit_with_parent(parent if parent is not None else os.getppid())
    with contextlib.suppress(OSError, ValueError, AttributeError):
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    if nice and hasattr(os, "nice"):
        with contextlib.suppress(OSError):
            os.nice(nice)
    # A worker allocates millions of short-lived, acyclic objects (nodes, tuples): collect rarely,
    # and never rescan what the imports created.
    gc.freeze()
    gc.set_threshold(50_000, 20, 20)


def _exit_with_parent(parent: int, poll: float = 0.5) -> None:
    """A parent killed by SIGKILL cannot shut its pool down, and the workers would wait forever on a
    queue whose other end their siblings keep open: watch the parent and exit when it is gone (it
    may already be, if it died while this process was starting). The parent is watched by pid: a
    worker forked by the forkserver has the forkserver, not the indexing process, as its OS parent."""
    if not _alive(parent):
        os._exit(0)

    def watch() -> None:
        while True:
            time.sleep(poll)
            if not _alive(parent):
                os._exit(0)

    threading.Thread(target=watch, name="fimble-parent-watch", daemon=True).start()


def _alive(pid: int) -> bool:
    """Whether process ``pid`` still runs: a zombie (killed, not yet reaped by its own parent) does
    not count. Cheap while ``pid`` is this process's parent (a spawned worker)."""
    if os.getppid() == pid:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else (cannot be our parent's pid reused by us)
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): os.kill found it


def analyze_group(tasks: list[Task]) -> list[Result]:
    """Pool entry point: a few files per round trip keeps IPC overhead low."""
    assert _config is not None, "init_worker was not called"
    return [analyze_path(task, _config) for task in tasks]


def digest_of(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def analyze_path(task: Task, config: WorkerConfig) -> Result:
    try:
        with open(task.path, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_size > config.max_file_bytes:
                return Skip(task.rel, "too large", st.st_size, st.st_mtime_ns)
            data = fh.read(config.max_file_bytes + 1)
    except FileNotFoundError:
        return Skip(task.rel, "gone")
    except OSError as err:
        log.info("cannot read %s: %s", task.path, err)
        return Skip(task.rel, "unreadable")
    if len(data) > config.max_file_bytes:
        return Skip(task.rel, "too large", st.st_size, st.st_mtime_ns)
    if b"\0" in data[:_SNIFF]:
        return Skip(task.rel, "binary", st.st_size, st.st_mtime_ns)
    digest = digest_of(data)
    if digest == task.old_digest:
        return Touch(task.rel, st.st_size, st.st_mtime_ns)
    return analyze_bytes(task.rel, data, st.st_size, st.st_mtime_ns, config, digest=digest)


def analyze_bytes(
    rel: str, data: bytes, size: int, mtime_ns: int, config: WorkerConfig, *, digest: bytes | None = None
) -> FileDoc:
    """Analyse content that is already in memory (a file just read, or an editor buffer)."""
    language = detect_language(rel, data[:_SNIFF])
    spec = language_spec(language)
    definitions: list[bytes] = []
    def_names: list[bytes] = []
    imports: list[tuple] = []
    has_errors = False
    if spec is not None:
        from fimble.indexer.parse import extract  # tree-sitter only where something is parsed

        try:
            found = extract(language, data)
        except Exception:  # a grammar bug must not stop the whole pass: index the file as text
            log.exception("tree-sitter failed on %s; indexing it as plain text", rel)
            language, spec = TEXT, None
        else:
            has_errors = found.has_errors
            # Encoded here, in the pool, rather than by the writer thread: a string of bytes
            # crosses the process boundary for less than a tuple of ten fields.
            definitions = [dumps(tuple(d)) for d in found.definitions]
            def_names = [d.name.encode("utf-8", "surrogateescape") for d in found.definitions]
            imports = [(i.flavor, i.spec, i.names, i.line, i.wildcard) for i in found.imports]
    lex = terms.analyze(data, stride=config.stride, block_bytes=config.block_bytes)
    module = None
    if rel.rsplit("/", 1)[-1] == "go.mod":
        match = _GO_MODULE.search(data)
        module = match.group(1).decode("utf-8", "replace") if match else None
    return FileDoc(
        rel=rel,
        size=size,
        mtime_ns=mtime_ns,
        digest=digest if digest is not None else digest_of(data),
        language=language,
        data=data,
        n_lines=lex.n_lines,
        definitions=definitions,
        def_names=def_names,
        imports=imports,
        blocks=dumps(lex.blocks),
        n_blocks=len(lex.blocks),
        hashes=lex.hashes,
        entry_blocks=lex.entry_blocks,
        tfs=lex.tfs,
        block_lengths=lex.block_lengths,
        total_length=lex.total_length,
        has_errors=has_errors,
        module=module,
    )
