"""What ``Completer``'s mixins (work-ahead, adoption) use of it, declared once.

The mixins are parts of one class split by job; they run on the completer's lock, stats, flights and
job start. Declaring those here, not in each mixin, keeps one copy of their signatures to keep true.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from fimble.completion.cancel import CancelToken
from fimble.completion.service import CompletionRequest, CompletionResult
from fimble.completion.typeahead import Flight
from fimble.completion.worker import Job

if TYPE_CHECKING:
    from fimble.completion.completer import CompleterStats

__all__ = ["CompleterParts"]


class CompleterParts:
    """Provided by ``Completer``."""

    _lock: threading.Lock
    _stats: CompleterStats
    _flights: dict[str, Flight]

    def _cache_key(self, request: CompletionRequest) -> bytes | None:  # pragma: no cover - Completer's
        raise NotImplementedError

    def _start(  # pragma: no cover - Completer's
        self,
        request: CompletionRequest,
        key: str | None,
        cache_key: bytes | None,
        submitted: float,
        waiter: CancelToken | None = None,
    ) -> Job[CompletionResult]:
        raise NotImplementedError
