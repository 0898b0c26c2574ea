"""A remote inference backend: fimble builds the prompt locally, an OpenAI-compatible server runs it.

When a team outgrows laptops, generation moves to a shared server (llama.cpp's ``llama-server``,
``python -m llama_cpp.server``, vLLM) while the index, context selection, prompt layout, stop rules and
post-processing stay local. ``RemoteEngine`` has the ``Engine`` surface the rest of fimble uses
(``tokenize``, ``fim``, ``n_ctx``, ``generate``), so ``Completer(load=lambda: load_remote_engine(...))``
is all a front door needs: the worker, cancellation and statistics work unchanged.

Tokenizing stays local with the same GGUF loaded vocabulary-only (a few MB, no weights), because prompt
budgets are counted in tokens and FIM control tokens are placed by id. The finished prompt is sent as
text with its control tokens written out (the server parses them) or, with ``prompt_format="tokens"``,
as token ids (llama-server and vLLM accept those; then file text can never be read as a control token).

Failures are ``BackendError`` with what to do: unreachable (start the server or fix the URL), too slow
(no first byte or no next chunk within ``timeout_s``), or an error status. A cancel closes the stream,
which stops the generation on servers that watch their connections (llama-server does).
"""

from __future__ import annotations

import ctypes
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fimble.completion.engine import Generation, StopCheck
from fimble.completion.engine.cancel import CancelToken
from fimble.completion.prompt.fim import FimTokens, candidate_texts, detect_fim
from fimble.errors import BackendError, ConfigError, ModelCorrupt

__all__ = ["RemoteConfig", "RemoteEngine", "load_remote_engine"]


@dataclass(frozen=True)
class RemoteConfig:
    url: str  # the server's base URL, e.g. http://gpu-box:8080 (``/v1/completions`` is appended)
    model: str = "default"  # the ``model`` field sent (llama-server ignores it; vLLM needs it)
    api_key: str | None = None
    timeout_s: float = 30.0  # longest wait for the first byte and between chunks
    connect_timeout_s: float = 5.0
    n_ctx: int = 4096  # the server's context size: prompt budgets are cut to fit it
    prompt_format: str = "text"  # text | tokens

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"--backend-url must start with http:// or https://, got {self.url!r}")
        if self.prompt_format not in ("text", "tokens"):
            raise ConfigError(f"prompt format must be 'text' or 'tokens', got {self.prompt_format!r}")

    @property
    def endpoint(self) -> str:
        base = self.url.rstrip("/")
        return base + ("/completions" if base.endswith("/v1") else "/v1/completions")


class _Vocab:
    """The model's tokenizer only (llama.cpp ``vocab_only``): no weights, no context."""

    def __init__(self, model_path: Path) -> None:
        import llama_cpp

        self._ll = llama_cpp
        llama_cpp.llama_backend_init()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), params)
        if not self._model:
            raise ModelCorrupt(
                f"llama.cpp could not read the vocabulary of {model_path}. "
                "Run `fimble models verify` and, if it fails, `fimble models pull NAME --force`."
            )
        self.vocab = llama_cpp.llama_model_get_vocab(self._model)
        self._buf = ctypes.create_string_buffer(256)

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        data = text.encode("utf-8", "surrogatepass")
        n_max = len(data) + 8
        buf = (self._ll.llama_token * n_max)()
        n = self._ll.llama_tokenize(self.vocab, data, len(data), buf, n_max, False, special)
        return list(buf[: max(n, 0)])

    def piece(self, token: int, special: bool) -> bytes:
        n = self._ll.llama_token_to_piece(self.vocab, token, self._buf, len(self._buf), 0, special)
        if n < 0:
            buf = ctypes.create_string_buffer(-n)
            n = self._ll.llama_token_to_piece(self.vocab, token, buf, -n, 0, special)
            return buf.raw[:n]
        return self._buf.raw[:n]

    def is_eog(self, token: int) -> bool:
        return bool(self._ll.llama_vocab_is_eog(self.vocab, token))

    def close(self) -> None:
        if self._model:
            self._ll.llama_model_free(self._model)
            self._model = None


class RemoteEngine:
    """``Engine``'s surface over an OpenAI-compatible completion server."""

    def __init__(self, config: RemoteConfig, model_path: str | Path, *, client: Any = None) -> None:
        import httpx

        self.config = config
        self.model_path = Path(model_path)
        started = time.perf_counter()
        self._vocab = _Vocab(self.model_path)
        ids = {t: i for t in candidate_texts() if len(i := self._vocab.tokenize(t, special=True)) == 1}
        vocab = {t: i[0] for t, i in ids.items()}
        self.fim: FimTokens = detect_fim(vocab, frozenset(i for i in vocab.values() if self._vocab.is_eog(i)))
        self.n_ctx = config.n_ctx
        self.load_ms = (time.perf_counter() - started) * 1000
        self.tokens_shifted = 0
        headers = {"Authorization": f"Bearer {config.api_key}"} if config.api_key else {}
        timeout = httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s)
        self._http = client or httpx.Client(timeout=timeout, headers=headers)
        self._stop_texts = [
            self._vocab.piece(t, True).decode("utf-8", "replace") for t in sorted(self.fim.stop)
        ]

    # -- the Engine surface ---------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        return self._vocab.tokenize(text, special)

    def detokenize(self, tokens: Sequence[int], *, special: bool = False) -> str:
        return b"".join(self._vocab.piece(t, special) for t in tokens).decode("utf-8", "replace")

    @property
    def cached_tokens(self) -> tuple[int, ...]:
        return ()  # the server keeps its own cache

    def reset(self) -> None:
        return None

    def generate(
        self,
        prompt: Sequence[int],
        *,
        max_tokens: int = 64,
        stop: StopCheck | None = None,
        cancel: CancelToken | None = None,
        on_text: Callable[[str], None] | None = None,
        reuse_limit: int = 0,
        guide: object = None,
    ) -> Generation:
        """Stream a completion of ``prompt`` from the server, applying ``stop`` to the text so far.

        A ``guide`` is ignored: it needs each token's logits, which the server keeps to itself."""
        t0 = time.perf_counter()
        body: dict[str, Any] = {
            "model": self.config.model,
            "prompt": list(prompt)
            if self.config.prompt_format == "tokens"
            else self.detokenize(prompt, special=True),
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
            "stop": self._stop_texts,
        }
        text, reason, first = "", "max_tokens", None
        if max_tokens <= 0:
            body["max_tokens"], body["stream"] = 1, False  # evaluate only; the answer is dropped
        with self._request(body, cancel) as chunks:
            for delta, finish in chunks:
                if first is None:
                    first = time.perf_counter()
                if max_tokens <= 0:
                    break
                text += delta
                if cancel is not None and cancel.cancelled:
                    reason = "cancelled"
                    break
                if stop is not None and (hit := stop(text)) is not None:
                    reason, keep = hit
                    text = text[:keep]
                    break
                if on_text is not None and delta:
                    on_text(text)
                if finish is not None:
                    reason = "max_tokens" if finish == "length" else "eog"
                    break
        if cancel is not None and cancel.cancelled:
            reason = "cancelled"
        t2 = time.perf_counter()
        t1 = first or t2
        return Generation(
            text=text,
            tokens=tuple(self.tokenize(text)),
            stop_reason=reason,
            prompt_tokens=len(prompt),
            tokens_evaluated=len(prompt),
            tokens_reused=0,
            prompt_ms=(t1 - t0) * 1000,
            generation_ms=(t2 - t1) * 1000,
        )

    def close(self) -> None:
        self._http.close()
        self._vocab.close()

    # -- HTTP -----------------------------------------------------------------------------------

    def _request(self, body: dict[str, Any], cancel: CancelToken | None) -> _Stream:
        return _Stream(self, body, cancel)


class _Stream:
    """One streamed request: yields (text delta, finish_reason), closes on exit or on cancel."""

    def __init__(self, engine: RemoteEngine, body: dict[str, Any], cancel: CancelToken | None) -> None:
        self.engine = engine
        self.body = body
        self.cancel = cancel
        self._response: Any = None
        self._done = threading.Event()

    def __enter__(self) -> Iterator[tuple[str, str | None]]:
        import httpx

        url = self.engine.config.endpoint
        try:
            request = self.engine._http.build_request("POST", url, json=self.body)
            self._response = self.engine._http.send(request, stream=True)
        except httpx.ConnectError as err:
            raise BackendError(
                f"the inference backend at {self.engine.config.url} is not reachable ({err}); "
                "start it or fix --backend-url"
            ) from None
        except httpx.TimeoutException:
            raise BackendError(
                f"the inference backend at {self.engine.config.url} did not answer within "
                f"{self.engine.config.timeout_s:g} s; check the server's load or raise the backend timeout"
            ) from None
        except httpx.HTTPError as err:
            raise BackendError(f"request to the inference backend at {url} failed: {err}") from None
        if self._response.status_code != 200:
            detail = self._response.read().decode("utf-8", "replace")[:300]
            self._response.close()
            raise BackendError(
                f"the inference backend at {url} answered {self._response.status_code}: {detail}"
            )
        if self.cancel is not None:
            threading.Thread(target=self._watch_cancel, daemon=True).start()
        return self._chunks()

    def _watch_cancel(self) -> None:
        """Close the response when the job is cancelled, even while waiting for the server."""
        assert self.cancel is not None
        while not self._done.wait(0.05):
            if self.cancel.cancelled:
                self._response.close()
                return

    def _chunks(self) -> Iterator[tuple[str, str | None]]:
        import httpx

        try:
            if not self.body["stream"]:
                data = json.loads(self._response.read())
                choice = (data.get("choices") or [{}])[0]
                yield choice.get("text", ""), choice.get("finish_reason") or "stop"
                return
            for line in self._response.iter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line[5:].strip()
                if payload == "[DONE]":
                    return
                try:
                    choice = (json.loads(payload).get("choices") or [{}])[0]
                except ValueError:
                    raise BackendError(
                        f"the inference backend sent a malformed event: {payload[:200]}"
                    ) from None
                yield choice.get("text") or "", choice.get("finish_reason")
        except httpx.TimeoutException:
            raise BackendError(
                f"the inference backend at {self.engine.config.url} stalled for more than "
                f"{self.engine.config.timeout_s:g} s; check the server's load or raise the backend timeout"
            ) from None
        except (httpx.HTTPError, httpx.StreamError):
            if self.cancel is not None and self.cancel.cancelled:
                return  # we closed the stream ourselves
            raise BackendError(
                f"the connection to the inference backend at {self.engine.config.url} broke"
            ) from None

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        if self._response is not None:
            self._response.close()


def load_remote_engine(
    url: str,
    model: str | None = None,
    *,
    api_key: str | None = None,
    timeout_s: float = 30.0,
    n_ctx: int = 4096,
    prompt_format: str = "text",
) -> RemoteEngine:
    """The ``--backend openai --backend-url URL`` engine: ``model`` (a registry name or .gguf path,
    default the registry's default) supplies the tokenizer; the server at ``url`` generates."""
    from fimble.models import registry, store

    path = store.resolve(model or registry.default_name())
    name = Path(model).stem if model and model.endswith(".gguf") else (model or registry.default_name())
    config = RemoteConfig(
        url=url, model=name, api_key=api_key, timeout_s=timeout_s, n_ctx=n_ctx, prompt_format=prompt_format
    )
    return RemoteEngine(config, path)
