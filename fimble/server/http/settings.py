"""The HTTP server's settings: one frozen value, validated where it is built (CLI or ``serve_http``).

These are server options, not a client's: HTTP clients send none, so their requests run with the
engine's own choices (``CompletionRequest.tuning`` None), whatever an editor connected over LSP
to the same process has set for its own requests (``fimble.completion.tuning``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fimble.errors import ConfigError
from fimble.server.exposure import is_loopback

__all__ = ["HttpSettings", "is_loopback", "settings_from_options"]


@dataclass(frozen=True)
class HttpSettings:
    """Limits and switches of the HTTP front door; every field has a safe default."""

    api_key: str | None = None  # bearer token; None: no authentication
    max_queue: int = 4  # generations queued or running at once; more get 429
    max_body_bytes: int = 4 * 1024 * 1024  # 413 beyond this
    max_tokens_cap: int = 1024  # a client asking for more (or for "unlimited") gets this many
    default_max_tokens: int = 128  # when a client does not say (Ollama's num_predict default)
    cors_origins: tuple[str, ...] = ()  # CORS is off unless origins are listed ("*" for any)
    retry_after_s: int = 2  # the Retry-After of 429 and loading 503 answers
    model_name: str | None = None  # the name reported to clients; None: the served model's name
    context_timeout_s: float = 0.15  # longest wait for fimble's repository context per request

    def __post_init__(self) -> None:
        for name in ("max_queue", "max_body_bytes", "max_tokens_cap", "default_max_tokens", "retry_after_s"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"HTTP setting {name} must be a positive integer, got {value!r}")
        if not isinstance(self.context_timeout_s, (int, float)) or not 0 <= self.context_timeout_s <= 10:
            raise ConfigError(
                f"HTTP setting context_timeout_s must be 0..10 seconds, got {self.context_timeout_s!r}"
            )
        if self.api_key is not None and not self.api_key.strip():
            raise ConfigError("the API key is empty; pass a non-empty --api-key or leave it unset")


def settings_from_options(api_key: str | None, options: Mapping[str, Any]) -> HttpSettings:
    """Build settings from ``serve_http`` keyword options, naming an unknown or bad option."""
    known = {f.name for f in dataclasses.fields(HttpSettings)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ConfigError(f"unknown HTTP option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = dict(options)
    if "cors_origins" in values:
        values["cors_origins"] = tuple(values["cors_origins"] or ())
    return HttpSettings(api_key=api_key or None, **values)
