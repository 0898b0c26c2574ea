"""Many completions at once, resumable: ``fimble batch IN.jsonl -o OUT.jsonl``.

A front door like the servers and the commands: it reads requests from a file instead of a socket,
plans each with the same prompt builders (``fimble.completion.raw_requests``), decodes them on one
engine and writes one output record per input line. Finished ids are journaled (LMDB), so a re-run
after a crash or a SIGKILL skips them and loses at most the requests under way (records are
journaled ``width`` at a time as they finish).
"""

from __future__ import annotations

from fimble.batch.items import BatchItem, ItemError, parse_items
from fimble.batch.journal import Journal
from fimble.batch.runner import BatchSummary, run_batch

__all__ = ["BatchItem", "BatchSummary", "ItemError", "Journal", "parse_items", "run_batch"]
