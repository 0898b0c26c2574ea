"""Loaded by every Python process of a server a reliability test starts (``PYTHONPATH``): it records
what the process does with the network and the disk, for the test to check afterwards.

- ``FIMBLE_TEST_NET_LOG``: every socket audit event (connect, bind, sendto, DNS lookups) as a JSON
  line ``[pid, event, args]``: a test asserts that none leaves loopback.
- ``FIMBLE_TEST_OPEN_LOG`` + ``FIMBLE_TEST_OPEN_WATCH``: every file opened under the watched
  directory (a test plants files outside the workspace there and asserts none is read).
- ``FIMBLE_TEST_PROMPT_LOG``: every text the model's tokenizer sees (``llama_cpp.llama_tokenize``):
  the prompts, as captured as they can be; only in the process that sets it (the variable is
  removed, so children do not import llama_cpp for it).
"""

from __future__ import annotations

import json
import os
import sys

_NET = os.environ.get("FIMBLE_TEST_NET_LOG")
_OPEN = os.environ.get("FIMBLE_TEST_OPEN_LOG")
_WATCH = os.environ.get("FIMBLE_TEST_OPEN_WATCH")
_PROMPTS = os.environ.pop("FIMBLE_TEST_PROMPT_LOG", None)


def _append(path: str, record: object) -> None:
    with open(path, "a", encoding="utf-8") as fh:  # (an audited open too: not under the watched dir)
        fh.write(json.dumps(record, default=repr) + "\n")


def _hook(event: str, args: tuple) -> None:
    if _NET and event.startswith("socket.") and event != "socket.__new__":
        _append(_NET, [os.getpid(), event, [a for a in args if not hasattr(a, "fileno")]])
    elif _OPEN and _WATCH and event == "open" and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if os.path.abspath(path).startswith(_WATCH):
            _append(_OPEN, [os.getpid(), path])


if _NET or (_OPEN and _WATCH):
    sys.addaudithook(_hook)

if _PROMPTS:
    import llama_cpp

    _tokenize = llama_cpp.llama_tokenize

    def _logged(vocab, text, *rest):  # type: ignore[no-untyped-def]
        _append(_PROMPTS, bytes(text).decode("utf-8", "replace"))
        return _tokenize(vocab, text, *rest)

    llama_cpp.llama_tokenize = _logged
