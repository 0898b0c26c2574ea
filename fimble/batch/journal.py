"""What a batch run has finished, kept so that a re-run does only the rest.

The journal (LMDB, full durability: every commit is synced) holds each finished id with its output
record. The output file is append-only JSONL and comes second: a group's records are committed to the
journal, then appended to the output and fsynced. A SIGKILL can therefore leave the output short of
the journal or with a torn last line, never the other way round; ``Journal.repair`` mends that on the
next start (the torn line is cut, journaled records missing from the output are appended, lines the
journal does not know are dropped), so the output ends up with exactly one record per finished id.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from fimble.errors import InputError

__all__ = ["Journal"]

_MAP_BYTES = 1 << 30  # room for ~1M short records; LMDB reserves address space, not disk


class Journal:
    """Finished ids of one output file, in ``<output>.journal/`` beside it."""

    def __init__(self, output: Path) -> None:
        import lmdb

        self.output = output
        self.path = output.with_name(output.name + ".journal")
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._env = lmdb.open(str(self.path), map_size=_MAP_BYTES, max_dbs=1, sync=True, metasync=True)
        except lmdb.Error as err:
            raise InputError(f"cannot open the batch journal {self.path}: {err}") from None
        self._done = self._env.open_db(b"done")

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._env.close()

    def done_ids(self) -> set[str]:
        with self._env.begin(db=self._done) as txn:
            return {bytes(k).decode() for k in txn.cursor().iternext(keys=True, values=False)}

    def lines(self) -> dict[str, str]:
        """Each finished id's output line, as journaled."""
        with self._env.begin(db=self._done) as txn:
            return {bytes(k).decode(): bytes(v).decode() for k, v in txn.cursor()}

    def commit(self, records: Iterable[Mapping[str, Any]]) -> list[str]:
        """Journal ``records`` (one transaction, synced), then append them to the output (fsynced).

        Returns the lines written, for a caller that echoes them."""
        records = list(records)
        lines = [json.dumps(r, ensure_ascii=False) for r in records]
        if not lines:
            return []
        with self._env.begin(db=self._done, write=True) as txn:
            for record, line in zip(records, lines, strict=True):
                txn.put(str(record["id"]).encode(), line.encode())
        self._append(lines)
        return lines

    def _append(self, lines: list[str]) -> None:
        with open(self.output, "a", encoding="utf-8") as out:
            out.write("".join(line + "\n" for line in lines))
            out.flush()
            os.fsync(out.fileno())

    def repair(self) -> int:
        """Make the output hold exactly the journaled records, once each; returns the lines changed.

        Rewrites the file (write a sibling, fsync, rename) only when it has to."""
        journaled = self.lines()
        kept: list[str] = []
        seen: set[str] = set()
        changed = 0
        if self.output.exists():
            for line in self.output.read_text(encoding="utf-8", errors="replace").split("\n"):
                if not line:
                    continue
                try:
                    record_id = str(json.loads(line)["id"])
                except (ValueError, KeyError, TypeError):
                    changed += 1  # a torn last line, or something that is not ours
                    continue
                if record_id in journaled and record_id not in seen:
                    seen.add(record_id)
                    kept.append(line)
                else:
                    changed += 1
        missing = [line for i, line in journaled.items() if i not in seen]
        if changed:
            tmp = self.output.with_name(self.output.name + ".tmp")
            with open(tmp, "w", encoding="utf-8") as out:
                out.write("".join(line + "\n" for line in kept + missing))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, self.output)
        elif missing or not self.output.exists():
            self._append(missing)  # also creates an empty output: a run with nothing done yet has one
        return changed + len(missing)
