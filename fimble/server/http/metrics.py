"""Prometheus text metrics for ``GET /metrics``: request counts, latency histograms, token and cache
counters, queue depth. Written by hand (the format is a few lines of text) to keep the HTTP extra to
Starlette and uvicorn.

Token counters come from ``Completer.stats()``, so they cover every front door of the process (LSP
and HTTP); request, latency and cache-hit series are the HTTP server's own.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from fimble.completion.completer import Completer
from fimble.server.http.runner import Finished, Gate

__all__ = ["Histogram", "Metrics", "MetricsMiddleware"]

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


def _labels(pairs: Iterable[tuple[str, str]]) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in pairs)
    return "{" + inner + "}" if inner else ""


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class Histogram:
    """A cumulative-bucket histogram per label set."""

    def __init__(self, buckets: tuple[float, ...] = _LATENCY_BUCKETS) -> None:
        self.buckets = buckets
        self._counts: dict[tuple[tuple[str, str], ...], list[int]] = {}
        self._sums: dict[tuple[tuple[str, str], ...], float] = defaultdict(float)

    def observe(self, value: float, labels: tuple[tuple[str, str], ...] = ()) -> None:
        counts = self._counts.setdefault(labels, [0] * (len(self.buckets) + 1))
        for i, bound in enumerate(self.buckets):
            if value <= bound:
                counts[i] += 1
        counts[-1] += 1
        self._sums[labels] += value

    def render(self, name: str) -> list[str]:
        out = []
        for labels, counts in sorted(self._counts.items()):
            for bound, n in zip(self.buckets, counts, strict=False):
                out.append(f"{name}_bucket{_labels((*labels, ('le', f'{bound:g}')))} {n}")
            out.append(f"{name}_bucket{_labels((*labels, ('le', '+Inf')))} {counts[-1]}")
            out.append(f"{name}_sum{_labels(labels)} {self._sums[labels]:.6f}")
            out.append(f"{name}_count{_labels(labels)} {counts[-1]}")
        return out


class Metrics:
    """All series of one HTTP server; updated from the event loop and the engine thread."""

    def __init__(self, completer: Completer, gate: Gate) -> None:
        self.completer = completer
        self.gate = gate
        self._lock = threading.Lock()
        self.requests: dict[tuple[tuple[str, str], ...], int] = defaultdict(int)
        self.latency = Histogram()
        self.prompt_seconds = Histogram()
        self.generation_seconds = Histogram()
        self.queue_seconds = Histogram()
        self.cache_hits = 0
        self.cache_misses = 0
        self.prompt_tokens = 0
        self.rejected = 0

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        with self._lock:
            self.requests[(("route", route), ("method", method), ("status", str(status)))] += 1
            self.latency.observe(seconds, (("route", route),))
            if status == 429:
                self.rejected += 1

    def observe_generation(self, done: Finished) -> None:
        gen = done.generation
        kind = (("kind", "fim" if done.plan.fim else "text"),)
        with self._lock:
            self.prompt_tokens += gen.prompt_tokens
            if gen.tokens_reused > 0:
                self.cache_hits += 1
            else:
                self.cache_misses += 1
            self.prompt_seconds.observe(gen.prompt_ms / 1000, kind)
            self.generation_seconds.observe(gen.generation_ms / 1000, kind)
            self.queue_seconds.observe(done.queued_ms / 1000)

    def render(self) -> str:
        stats = self.completer.stats()
        worker = self.completer.worker
        ready = worker.ready.is_set() and worker.load_error is None
        lines: list[str] = []

        def series(name: str, kind: str, help_text: str, samples: list[str]) -> None:
            lines.append(f"# HELP {name} {help_text}")
            lines.append(f"# TYPE {name} {kind}")
            lines.extend(samples)

        with self._lock:
            series(
                "fimble_http_requests_total",
                "counter",
                "HTTP requests by route, method and status.",
                [f"fimble_http_requests_total{_labels(k)} {v}" for k, v in sorted(self.requests.items())],
            )
            series(
                "fimble_http_request_duration_seconds",
                "histogram",
                "HTTP request latency (to the last byte of a stream).",
                self.latency.render("fimble_http_request_duration_seconds"),
            )
            series(
                "fimble_http_rejected_total",
                "counter",
                "Requests refused with 429 because the queue was full.",
                [f"fimble_http_rejected_total {self.rejected}"],
            )
            series(
                "fimble_prompt_eval_seconds",
                "histogram",
                "Prompt evaluation time of HTTP generations.",
                self.prompt_seconds.render("fimble_prompt_eval_seconds"),
            )
            series(
                "fimble_generation_seconds",
                "histogram",
                "Token generation time of HTTP generations.",
                self.generation_seconds.render("fimble_generation_seconds"),
            )
            series(
                "fimble_queue_wait_seconds",
                "histogram",
                "Time HTTP generations waited for the engine.",
                self.queue_seconds.render("fimble_queue_wait_seconds"),
            )
            series(
                "fimble_kv_cache_hits_total",
                "counter",
                "HTTP generations that reused part of the KV cache.",
                [f"fimble_kv_cache_hits_total {self.cache_hits}"],
            )
            series(
                "fimble_kv_cache_misses_total",
                "counter",
                "HTTP generations that evaluated their whole prompt.",
                [f"fimble_kv_cache_misses_total {self.cache_misses}"],
            )
            series(
                "fimble_http_prompt_tokens_total",
                "counter",
                "Prompt tokens of HTTP generations (evaluated plus reused).",
                [f"fimble_http_prompt_tokens_total {self.prompt_tokens}"],
            )
        together = getattr(self.completer, "side_by_side", None)
        if together is not None:
            series(
                "fimble_side_by_side_generations_total",
                "counter",
                "HTTP generations of overlapping clients decoded in one batch with others.",
                [f"fimble_side_by_side_generations_total {together.generations}"],
            )
        series(
            "fimble_queue_depth",
            "gauge",
            "HTTP generations queued or running.",
            [f"fimble_queue_depth {self.gate.active}"],
        )
        series(
            "fimble_queue_limit",
            "gauge",
            "Most HTTP generations admitted at once.",
            [f"fimble_queue_limit {self.gate.limit}"],
        )
        series(
            "fimble_model_ready", "gauge", "1 once the model is loaded.", [f"fimble_model_ready {int(ready)}"]
        )
        for name, value, help_text in (
            (
                "fimble_completions_requested_total",
                stats.requests,
                "Completions submitted (all front doors).",
            ),
            ("fimble_completions_completed_total", stats.completed, "Completions that ran to a stop."),
            ("fimble_completions_cancelled_total", stats.cancelled, "Completions cancelled while running."),
            (
                "fimble_tokens_evaluated_total",
                stats.tokens_evaluated,
                "Prompt tokens evaluated by the model.",
            ),
            ("fimble_tokens_reused_total", stats.tokens_reused, "Prompt tokens reused from the KV cache."),
            ("fimble_tokens_generated_total", stats.tokens_generated, "Tokens generated."),
        ):
            series(name, "counter", help_text, [f"{name} {value}"])
        return "\n".join(lines) + "\n"


class MetricsMiddleware:
    """Counts every HTTP request and times it to its last byte, labelled by its route template."""

    def __init__(self, app: Any, metrics: Metrics, routes: Iterable[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = set(routes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_wrapper(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            path = scope.get("path", "")
            route = path if path in self.routes else "other"
            self.metrics.observe_request(
                route, scope.get("method", ""), status, time.perf_counter() - started
            )
