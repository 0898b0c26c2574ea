"""Add the ``cross_file_unseen`` group to eval results written before it existed, without the model.

A committed ``fimble eval`` JSON keeps every sample's path, line, cursor column and cross-file names;
the text above the cursor is the source file's (masking a line changes nothing above the cursor).
So whether a line's cross-file names were already spelled out above it can be decided afterwards,
and the summaries, context effect and recommendation rebuilt from the same rows with
``build_report``. The predictions and timings are not touched.

    python bench/eval_regroup.py bench/results/eval_flask.json [more.json ...]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from fimble.evaluation.crossfile import not_named_above
from fimble.evaluation.report import build_report
from fimble.evaluation.sources import fetch_sdist


def regroup(path: Path) -> dict[str, int]:
    report = json.loads(path.read_text())
    meta = report["meta"]
    root = fetch_sdist(meta["source"])
    texts: dict[str, list[str]] = {}
    for r in report["samples"]:
        if r["path"] not in texts:
            texts[r["path"]] = (root / r["path"]).read_text(encoding="utf-8").split("\n")
        lines = texts[r["path"]]
        assert lines[r["line"]][r["column"] :].strip().startswith(r["truth"].strip()[:8]), r["id"]
        above = "\n".join([*lines[: r["line"]], lines[r["line"]][: r["column"]]])
        r["cross_file_unseen"] = not_named_above(r["cross_file_names"], above)
    meta["regrouped"] = (
        "cross_file_unseen added afterwards by bench/eval_regroup.py from the sdist's source "
        "(the text above each cursor); summaries rebuilt from the same rows"
    )
    rebuilt = build_report(report["samples"], meta)
    path.write_text(json.dumps(rebuilt, indent=2) + "\n")
    rows = [r for r in rebuilt["samples"] if r["context"]]
    return {"samples": len(rows), "unseen": sum(bool(r["cross_file_unseen"]) for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="+", type=Path, help="eval.json files, rewritten in place")
    for path in parser.parse_args().files:
        print(path, regroup(path))


if __name__ == "__main__":
    main()
