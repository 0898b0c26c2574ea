"""Acceptance signals, kept on this machine: one JSON line per served, shown or accepted suggestion.

Editors tell the server what happened to a suggestion in three ways: the ``command`` on an item runs
when it is accepted (``fimble.accept``), and Copilot-style clients send
``textDocument/didShowCompletion`` and ``textDocument/didPartiallyAcceptCompletion``. Each becomes a
line in ``<cache root>/acceptance.jsonl`` (no code, only sizes and timings) from which acceptance
rates are computed (``summarize``). Nothing is sent anywhere.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from fimble.errors import FimbleError

__all__ = ["AcceptanceLog", "Served", "default_path", "summarize"]

log = logging.getLogger(__name__)
_REMEMBER = 512  # served suggestions kept to enrich later events


def default_path() -> Path:
    from fimble.paths import cache_root

    return cache_root() / "acceptance.jsonl"


@dataclass(frozen=True)
class Served:
    """What is logged about one suggestion (never its text)."""

    id: str
    kind: str  # inline | completion
    language: str
    trigger: str  # invoked | automatic
    chars: int
    lines: int
    model: str
    latency_ms: float


class AcceptanceLog:
    """Appends events to a JSONL file; a write failure is reported once, then logging stops."""

    def __init__(self, path: Path | None = None, *, enabled: bool = True) -> None:
        self.path = path or default_path()
        self.enabled = enabled
        self._served: OrderedDict[str, Served] = OrderedDict()
        self._counts: Counter[str] = Counter()
        self._failed = False
        self._lock = threading.Lock()

    def counts(self) -> dict[str, int]:
        """Events this process logged, by kind (for ``fimble.status``)."""
        with self._lock:
            return dict(self._counts)

    def served(self, item: Served) -> FimbleError | None:
        with self._lock:
            self._served[item.id] = item
            while len(self._served) > _REMEMBER:
                self._served.popitem(last=False)
        return self._write({"event": "served", **asdict(item)})

    def event(self, event: str, suggestion_id: str, **extra: object) -> FimbleError | None:
        """Log ``shown``/``accepted``/``partial`` for a suggestion served earlier (or unknown)."""
        with self._lock:
            known = self._served.get(suggestion_id)
        base = asdict(known) if known else {"id": suggestion_id}
        return self._write({"event": event, **base, **extra})

    def _write(self, entry: dict[str, object]) -> FimbleError | None:
        """Returns an error the first time the file cannot be written, for one showMessage."""
        with self._lock:
            self._counts[str(entry["event"])] += 1
            if not self.enabled or self._failed:
                return None
            entry = {"ts": round(time.time(), 3), **entry}
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(entry, separators=(",", ":")) + "\n")
            except OSError as err:
                self._failed = True
                log.error("cannot write %s: %s", self.path, err)
                return FimbleError(
                    f"fimble cannot write its acceptance log {self.path} ({err.strerror}); "
                    "completions go on. Make the directory writable or set FIMBLE_HOME to one that is."
                )
        return None


def summarize(lines: Iterable[str]) -> dict[str, float | int]:
    """Counts and rates from acceptance.jsonl lines: accepted / shown (or / served if never shown)."""
    counts: Counter[str] = Counter()
    accepted_ids: set[str] = set()
    for line in lines:
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        event = entry.get("event")
        if event == "accepted":
            accepted_ids.add(str(entry.get("id")))
        counts[str(event)] += 1
    shown = counts["shown"] or counts["served"]
    out: dict[str, float | int] = {k: counts[k] for k in ("served", "shown", "accepted", "partial")}
    out["acceptance_rate"] = round(len(accepted_ids) / shown, 4) if shown else 0.0
    return out
