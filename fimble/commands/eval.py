"""`fimble eval [REPO]`: how well completion works on a real repository, as served and at its ceiling."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

__all__ = ["eval_command"]


def _models(model: tuple[str, ...], models: str | None) -> tuple[str, ...]:
    names = [*model, *(m.strip() for m in (models or "").split(",") if m.strip())]
    return tuple(dict.fromkeys(names)) or ("qwen2.5-coder-1.5b",)


def _think_times(values: tuple[str, ...]) -> tuple[int, ...]:
    """``--think-ms`` values, each one number or a comma list, in order, each once."""
    out: list[int] = []
    for value in values:
        for part in value.split(","):
            if not part.strip():
                continue
            try:
                ms = int(part)
            except ValueError:
                raise click.BadParameter(f"expected milliseconds, got {part.strip()!r}") from None
            if not 0 <= ms <= 600_000:
                raise click.BadParameter(f"expected 0 to 600000 ms, got {ms}")
            out.append(ms)
    return tuple(dict.fromkeys(out)) or (0,)


@click.command("eval", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("repo", required=False, type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--pypi",
    "pypi",
    metavar="NAME==VERSION",
    help="Evaluate on this project's source distribution from PyPI (downloaded once, then cached).",
)
@click.option(
    "--mode",
    type=click.Choice(["served", "ceiling", "both"]),
    default="served",
    show_default=True,
    help="served: ask a real `fimble serve` over LSP, as an editor does (small first prompts, "
    "deadlines, caches); ceiling: complete in-process from the full prompt with no deadline; "
    "both: each on the same lines.",
)
@click.option(
    "--think-ms",
    "think_ms",
    multiple=True,
    default=("0,2000",),
    show_default=True,
    metavar="MS[,MS...]",
    help="Served: the pause between the cursor arriving (didFocus) and the request (repeatable or "
    "a comma list); each think time runs in its own fresh server.",
)
@click.option(
    "--server-option",
    "server_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Served: a server setting sent in initializationOptions (repeatable; JSON values; dotted "
    "keys nest), e.g. deadlineMs=8000 or firstSuggestionMs=3000. Unset ones keep the server's "
    "defaults.",
)
@click.option(
    "--language",
    type=click.Choice(["auto", "python", "typescript", "javascript"]),
    default="auto",
    show_default=True,
    help="Which files' lines are sampled (typescript includes .tsx); auto: the one with the most files.",
)
@click.option("--samples", "-n", default=40, show_default=True, type=click.IntRange(1, 10000))
@click.option("--seed", default=0, show_default=True, type=int, help="Which lines are masked.")
@click.option("--model", "-m", "model", multiple=True, help="Model to evaluate (repeatable).")
@click.option("--models", default=None, metavar="A,B", help="Models to evaluate, comma-separated.")
@click.option(
    "--context",
    type=click.Choice(["on", "off", "both"]),
    default="both",
    show_default=True,
    help="Ceiling: repository context from the index with it, without it, or both (to compare). "
    "The served mode always has the server's context.",
)
@click.option(
    "--cross-share",
    default=0.5,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Share of samples drawn from lines that use a symbol defined in another file.",
)
@click.option(
    "--cross-unseen",
    is_flag=True,
    help="Count a line as cross-file only when the file does not name that symbol above the cursor "
    "(CrossCodeEval's rule: the lines only repository context can help with).",
)
@click.option(
    "--max-tokens",
    default=48,
    show_default=True,
    type=click.IntRange(1, 512),
    help="Tokens generated per suggestion at most (served: the server's maxTokens).",
)
@click.option(
    "--prefix-tokens",
    default=None,
    type=click.IntRange(16),
    help="File-before-cursor budget (served: prefixTokens, else the server's default).",
)
@click.option(
    "--suffix-tokens",
    default=None,
    type=click.IntRange(0),
    help="File-after-cursor budget (served: suffixTokens, else the server's default).",
)
@click.option(
    "--context-tokens",
    default=None,
    type=click.IntRange(0),
    help="Other files' snippets budget (served: contextTokens, else the server's default).",
)
@click.option("--threads", "-t", default=0, type=click.IntRange(0, 256), help="CPU threads (0: cores).")
@click.option(
    "--width",
    "-w",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Ceiling: lines decoded side by side, one KV sequence each (`fimble batch`'s path; the same "
    "answers, near-ties aside). 1: one at a time. The served mode asks one place at a time, as an editor.",
)
@click.option(
    "--out",
    "out",
    default=Path("fimble-eval"),
    show_default=True,
    type=click.Path(path_type=Path, file_okay=False),
    help="Folder for eval.json, eval.html and (served) cases.jsonl, served.jsonl and the servers' logs.",
)
def eval_command(
    repo: Path | None,
    pypi: str | None,
    mode: str,
    think_ms: tuple[str, ...],
    server_options: tuple[str, ...],
    language: str,
    samples: int,
    seed: int,
    model: tuple[str, ...],
    models: str | None,
    context: str,
    cross_share: float,
    cross_unseen: bool,
    max_tokens: int,
    prefix_tokens: int | None,
    suffix_tokens: int | None,
    context_tokens: int | None,
    threads: int,
    width: int,
    out: Path,
) -> None:
    """Mask lines of a real repository (REPO, or --pypi NAME==VERSION) and measure the completions.

    --mode served (the default) copies the repository to a temporary folder, starts a real
    `fimble serve` on it with a fresh cache per think time, and for each masked line asks at two
    places (right after the indentation, and mid-line), after a didFocus and the think time: an
    automatic inline completion, then an invoked one. Each place is labelled cold (first in its
    file), warm (a file seen before) or revisited (a last pass over each file's first place). It
    reports exact match (with a 95% interval), edit similarity, empty answers and latency p50/p90
    per think time, request kind, line group (cross-file or not) and visit, and writes every place
    to OUT/cases.jsonl (the masked file, cursor and truth) so another system can answer the same.

    --mode ceiling completes each line in-process from its full prompt with no deadline, with and
    without repository context: exact match, edit similarity, identifier match, latency and tokens
    evaluated, a context effect with a sign test, and a recommended model and context budget.
    --mode both does both on the same lines. Writes OUT/eval.json and a self-contained OUT/eval.html.

    A served place costs about 2-25 s on the 1.5B model on 2 cores (cold places most), a ceiling
    sample 1.5-15 s per context setting.

    Example: fimble eval --pypi requests==2.32.3 --samples 12 --mode both --think-ms 0,2000
    """
    from fimble.errors import InputError
    from fimble.evaluation import EvalConfig, ServedSettings, evaluate
    from fimble.evaluation.served import parse_server_option

    if (repo is None) == (pypi is None):
        raise InputError("give a repository folder or --pypi NAME==VERSION (one of them)")
    from fimble.completion.prompt.fim import CONTEXT_TOKENS, PREFIX_TOKENS, SUFFIX_TOKENS

    config = EvalConfig(
        samples=samples,
        seed=seed,
        models=_models(model, models),
        contexts={"on": (True,), "off": (False,), "both": (False, True)}[context],
        max_tokens=max_tokens,
        prefix_budget=prefix_tokens or PREFIX_TOKENS,
        suffix_budget=suffix_tokens if suffix_tokens is not None else SUFFIX_TOKENS,
        context_budget=context_tokens if context_tokens is not None else CONTEXT_TOKENS,
        threads=threads,
        width=width,
        cross_share=cross_share,
        cross_unseen=cross_unseen,
        language=language,
    )
    served = ServedSettings(
        think_ms=_think_times(think_ms), server_options=dict(map(parse_server_option, server_options))
    )
    given = (
        ("prefixTokens", prefix_tokens),
        ("suffixTokens", suffix_tokens),
        ("contextTokens", context_tokens),
    )
    budgets = {k: v for k, v in given if v is not None}
    report, (json_path, html_path) = evaluate(
        config, repo=repo, pypi=pypi, out=out, mode=mode, served=served, server_budgets=budgets
    )
    if "summaries" in report:
        _echo_ceiling(report)
    if "served" in report:
        _echo_served(report["served"])
    click.echo(f"wrote {json_path} and {html_path}")


def _echo_served(served: dict[str, Any]) -> None:
    from fimble.evaluation.served_report import table

    click.echo(table(served["summary"]))
    for run in served["runs"]:
        if "error" in run:
            click.echo(f"the server for {run['model']} (think {run['think_ms']} ms) failed: {run['error']}")
    for v in served["versus_ceiling"]:
        click.echo(
            f"on the ceiling's {v['n']} places, {v['request']} after {v['think_ms']} ms: served "
            f"{100 * v['served_exact_match']:.0f}% exact against {100 * v['ceiling_exact_match']:.0f}% "
            f"in-process with context ({v['lost_to_serving']} lost to serving, {v['won_by_serving']} won)"
        )
    click.echo(f"the {served['cases']} places asked are in cases.jsonl")


def _echo_ceiling(report: dict[str, Any]) -> None:
    for cond, s in report["summaries"].items():
        for group in ("all", "cross_file", "cross_file_unseen", "other"):
            g = s["groups"][group]
            if not g["n"]:
                continue
            em = "-" if g["exact_match"] is None else f"{100 * g['exact_match']:.0f}%"
            es = "-" if g["edit_similarity"] is None else f"{100 * g['edit_similarity']:.0f}%"
            click.echo(
                f"{cond:<40} {group:<17} n={g['n']:<4} exact {em:>4}  edit sim {es:>4}  "
                f"p50 {g['latency_p50_ms']:.0f} ms  p90 {g['latency_p90_ms']:.0f} ms  "
                f"tokens evaluated {g['tokens_evaluated_mean']:.0f}"
            )
    for model_name, groups in report["context_effect"].items():
        for group, g in groups.items():
            if g["n"] and g["relative_change"] is not None:
                ci = g["interval"]
                sure = "" if g["p_value"] is None else f", sign test p={g['p_value']:.3g}"
                sure += f", 95% interval {ci[0]:+.0%} to {ci[1]:+.0%}" if ci else ""
                click.echo(
                    f"context on {model_name}, {group}: {g['relative_change']:+.0%} "
                    f"({g['won']} won, {g['lost']} lost{sure})"
                )
    click.echo(report["recommendation"]["text"])
