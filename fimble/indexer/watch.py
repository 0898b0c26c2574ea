"""Keep the index fresh while the server runs: file-system events, debounced, to the writer thread.

Editors and ``git checkout`` write files in bursts (temp file, rename, chmod...), so events are
collected and handed over only after ``debounce`` seconds of quiet (at most ``max_delay`` after the
first one). A changed ``.gitignore`` or a directory created or moved in triggers a full pass instead:
with the size/mtime pre-check that is cheap, and it is the only way to see what the change includes
or excludes. Ignored paths and secrets are filtered before anything is queued: the writer never opens
them.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from fimble.indexer.ignore import IgnoreRules
from fimble.indexer.updater import Updater

__all__ = ["Watcher"]

log = logging.getLogger(__name__)

_IGNORED_EVENTS = {"opened", "closed_no_write"}


class Watcher(FileSystemEventHandler):
    """Watches ``root`` recursively and feeds the ``Updater``."""

    def __init__(
        self,
        root: Path,
        rules: IgnoreRules,
        updater: Updater,
        *,
        debounce: float = 0.3,
        max_delay: float = 2.0,
        store_path: Path | None = None,
    ) -> None:
        super().__init__()
        self.root = root
        self._root_str = os.path.abspath(root)
        self._store = os.path.abspath(store_path) if store_path else None
        self.rules = rules
        self.updater = updater
        self.debounce = debounce
        self.max_delay = max_delay
        self._lock = threading.Lock()
        self._pending: dict[str, str] = {}
        self._rescan = False
        self._first = 0.0
        self._last = 0.0
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._observer: Observer | None = None
        self._flusher: threading.Thread | None = None

    def start(self) -> bool:
        """Start watching; False (logged) when the OS refuses, e.g. out of inotify watches."""
        observer = Observer()
        observer.daemon = True
        try:
            observer.schedule(self, self._root_str, recursive=True)
            observer.start()
        except OSError as err:
            log.warning(
                "cannot watch %s (%s); the index updates on `fimble index` and saved buffers only",
                self.root,
                err,
            )
            return False
        self._observer = observer
        self._flusher = threading.Thread(target=self._flush_loop, name="fimble-index-watch", daemon=True)
        self._flusher.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(5)
        if self._flusher is not None:
            self._flusher.join(5)

    # -- events (observer thread) -------------------------------------------------------------------

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_EVENTS:
            return
        if event.is_directory and event.event_type in ("modified", "attrib"):
            return
        paths = [(event.src_path, "deleted" if event.event_type == "moved" else event.event_type)]
        dest = getattr(event, "dest_path", "")
        if event.event_type == "moved" and dest:
            paths.append((dest, "created"))
        for path, kind in paths:
            self._note(os.fsdecode(path), kind, event.is_directory)

    def _note(self, path: str, kind: str, is_dir: bool) -> None:
        if self._store and (path == self._store or path.startswith(self._store + os.sep)):
            return
        rel = os.path.relpath(path, self._root_str)
        if rel == "." or rel.startswith(".."):
            return
        rel = rel.replace(os.sep, "/")
        name = rel.rsplit("/", 1)[-1]
        with self._lock:
            if name == ".gitignore" or rel == ".git/info/exclude" or (is_dir and kind != "deleted"):
                self._rescan = True
            elif is_dir:
                self._pending[rel] = "tree"
            else:
                self._pending[rel] = "remove" if kind == "deleted" else "file"
            now = time.monotonic()
            if not self._first:
                self._first = now
            self._last = now
        self._wake.set()

    # -- debounced hand-over (flusher thread) --------------------------------------------------------

    def _flush_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            self._wake.clear()
            while not self._stop.is_set():
                with self._lock:
                    now = time.monotonic()
                    quiet = now - self._last >= self.debounce
                    overdue = self._first and now - self._first >= self.max_delay
                    if (quiet or overdue) and (self._pending or self._rescan):
                        pending, self._pending = self._pending, {}
                        rescan, self._rescan = self._rescan, False
                        self._first = 0.0
                        break
                    if not (self._pending or self._rescan):
                        pending, rescan = {}, False
                        break
                    wait = max(0.01, self.debounce - (now - self._last))
                self._stop.wait(wait)
            else:
                return
            self._hand_over(pending, rescan)

    def _hand_over(self, pending: dict[str, str], rescan: bool) -> None:
        if rescan:
            self.rules.forget()
            self.updater.request_pass()
        for rel, kind in pending.items():
            if kind != "tree" and not self.rules.allowed(rel):
                continue  # ignored or secret: never read (one that just became ignored goes at the next pass)
            self.updater.change(rel, kind)
        if pending or rescan:
            log.debug("index: %d change(s) queued%s", len(pending), ", full rescan" if rescan else "")
