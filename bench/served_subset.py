"""``fimble eval --mode served`` on a few chosen lines of an earlier run's ``cases.jsonl``.

A whole served run asks every place of a repository (about 120 on rxjs); checking a change that
touches one kind of line (import lines, say) needs only those lines, through the same real server,
with the same masked files, cursors and think time. The rows are ``served.jsonl`` rows, scored the
same way. Writes OUT/served.jsonl and prints one line per answer.

    python bench/served_subset.py RUN/cases.jsonl internal/config.ts:2:1,... --think-ms 2000 --out DIR
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fimble.evaluation.cases import Case  # noqa: E402
from fimble.evaluation.served import ServedSettings, run_served  # noqa: E402


def load(cases_file: Path, samples: set[str]) -> tuple[Path, list[Case]]:
    """The source folder and the cases of ``samples`` (both places of each line), in run order."""
    source: Path | None = None
    out: list[Case] = []
    for line in cases_file.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        source = Path(r["source"])
        if r["sample"] not in samples:
            continue
        out.append(
            Case(
                sample=r["sample"],
                path=r["path"],
                language=r["language"],
                line=r["line"],
                column=r["column"],
                position=r["position"],
                truth=r["truth"],
                text=r["text"],
                offset=r["offset"],
                cross_file=tuple(r["cross_file_names"]),
                cross_file_unseen=tuple(r["cross_file_unseen"]),
                visit=r["visit"],
                ceiling=r["ceiling_position"],
            )
        )
    if source is None:
        raise SystemExit(f"{cases_file}: no cases")
    return source, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", type=Path, help="cases.jsonl of a served run")
    parser.add_argument("samples", help="comma-separated sample ids (path:line:col of the line start)")
    parser.add_argument("--think-ms", default="2000", help="comma-separated think times")
    parser.add_argument("--model", default="qwen2.5-coder-1.5b")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument(
        "--root",
        type=Path,
        help="the source folder, when the run's was a PyPI spec "
        "(fimble eval's cache: ~/.cache/fimble/eval-sources/NAME-VERSION)",
    )
    args = parser.parse_args()
    source, cases = load(args.cases, set(args.samples.split(",")))
    source = args.root or source
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    settings = ServedSettings(think_ms=tuple(int(t) for t in args.think_ms.split(",")))
    run_served(
        source,
        cases,
        [],
        models=[args.model],
        settings=settings,
        max_tokens=48,
        threads=0,
        out=args.out,
        on_row=rows.append,
    )
    with open(args.out / "served.jsonl", "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    for row in rows:
        print(
            row["think_ms"],
            row["request"],
            row["case"],
            "exact" if row["exact"] else "wrong",
            f"{row['latency_ms']:.0f} ms",
            repr(row["prediction"]),
        )


if __name__ == "__main__":
    main()
