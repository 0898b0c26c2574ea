"""What one completion was made of and what it cost, as data and as the lines a person reads.

`fimble explain` prints these lines and the language server's ``fimble.status`` returns the same data
(and lines) for the last request, so the two never disagree about what a request did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fimble.completion.engine import Generation
    from fimble.completion.service import CompletionResult

__all__ = ["explanation", "explanation_lines", "generation_stats", "timings_line"]


def timings_line(gen: Generation) -> str:
    """Prompt size, KV reuse, timings and stop reason on one line."""
    tps = len(gen.tokens) / (gen.generation_ms / 1000) if gen.generation_ms > 0 else 0.0
    drafts = f", {gen.accepted}/{gen.drafted} drafted tokens accepted" if gen.drafted else ""
    guide = f" | import guide: {gen.guide}" if gen.guide else ""
    return (
        f"prompt {gen.prompt_tokens} tokens: {gen.tokens_evaluated} evaluated, {gen.tokens_reused} reused, "
        f"{gen.prompt_ms:.0f} ms | generated {len(gen.tokens)} tokens in {gen.generation_ms:.0f} ms "
        f"({tps:.1f} tok/s{drafts}) | stop: {gen.stop_reason}{guide}"
    )


def generation_stats(gen: Generation) -> dict[str, Any]:
    """What a generation cost: KV reuse, timings, speculative drafts and how it stopped."""
    return {
        "stop_reason": gen.stop_reason,
        "prompt_tokens": gen.prompt_tokens,
        "tokens_evaluated": gen.tokens_evaluated,
        "tokens_reused": gen.tokens_reused,
        "tokens_generated": len(gen.tokens),
        "prompt_ms": round(gen.prompt_ms, 1),
        "generation_ms": round(gen.generation_ms, 1),
        "drafted": gen.drafted,  # speculative decoding: draft tokens checked, and accepted
        "accepted": gen.accepted,
        **({"guide": gen.guide} if gen.guide else {}),  # an import line kept to what would work
    }


def explanation(result: CompletionResult) -> dict[str, Any]:
    """The prompt's parts (kind, tokens, reason, file), KV reuse, timings, shape and stop reason."""
    gen = result.generation
    return {
        "parts": [
            {"kind": p.kind, "tokens": p.tokens, "reason": p.reason, **({"path": p.path} if p.path else {})}
            for p in result.parts
        ],
        **generation_stats(gen),
        "multiline": result.multiline,
        "shape": result.shape,
        # From a first prompt (a cold place: the local window, smaller): shown, not cached.
        "provisional": result.provisional,
        "chars": len(result.text),
        "lines": explanation_lines(result),
    }


def explanation_lines(result: CompletionResult) -> list[str]:
    """The explanation as `fimble explain` prints it (without the suggestion's text)."""
    lines = [f"prompt: {sum(p.tokens for p in result.parts)} tokens"]
    for part in result.parts:
        where = f"{part.path}  " if part.path else ""
        lines.append(f"  {part.kind:<8} {part.tokens:>6}  {where}{part.reason}")
    lines.append(timings_line(result.generation))
    shape = "multi-line" if result.multiline else "single line"
    lines.append(f"shape: {shape} ({result.shape})" if result.shape else f"shape: {shape}")
    if result.provisional:
        lines.append("first prompt: a cold place, a smaller prompt; the full prompt answers once it is warm")
    return lines
