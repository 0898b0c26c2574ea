"""Compare what the indexer extracts from Python files with function bodies blanked (skeleton.py)
against a whole-file parse, on the standard library of the running interpreter (or ``--tree``).

Reports, as JSON (``--out``), how many definitions and imports each way finds, every difference by
kind (definitions only the full parse finds, and why: nested in a function body or not; definitions
whose fields differ; imports only one way finds), files that fell back to a whole parse, and the CPU
time of each way (scan + parse + extract). Run: ``.venv/bin/python bench/skeleton_diff.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import sysconfig
import time
from collections import Counter
from pathlib import Path

from fimble.indexer import parse, skeleton


def _extract(data: bytes, *, skim: bool) -> parse.Extraction:
    """The indexer's extraction as it is (``skim``), or as it was: whole parse, nested kept."""
    if skim:
        return parse.extract("python", data)
    real = parse.language_spec
    parse.language_spec = lambda name: dataclasses.replace(real(name), skeleton=False)  # type: ignore[assignment]
    try:
        return parse.extract("python", data)
    finally:
        parse.language_spec = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", type=Path, default=Path(sysconfig.get_paths()["stdlib"]))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--examples", type=int, default=8)
    args = ap.parse_args()
    files = sorted(
        p for p in args.tree.rglob("*.py") if "site-packages" not in p.parts and "__pycache__" not in p.parts
    )
    datas = [(p, p.read_bytes()) for p in files if p.stat().st_size <= 1 << 20]
    parse.warm("python")
    cpu = {"full": 0.0, "skeleton": 0.0, "scan_only": 0.0}
    counts: Counter[str] = Counter()
    examples: dict[str, list] = {}

    def note(kind: str, item: object) -> None:
        counts[kind] += 1
        if len(examples.setdefault(kind, [])) < args.examples:
            examples[kind].append(item)

    for path, data in datas:
        rel = str(path.relative_to(args.tree))
        t0 = time.process_time()
        full = _extract(data, skim=False)
        t1 = time.process_time()
        new = _extract(data, skim=True)
        t2 = time.process_time()
        skel = skeleton.skeleton(data)
        t3 = time.process_time()
        cpu["full"] += t1 - t0
        cpu["skeleton"] += t2 - t1
        cpu["scan_only"] += t3 - t2
        counts["files"] += 1
        counts["bytes"] += len(data)
        if skel is None:
            counts["files_not_blanked"] += 1
        else:
            counts["bytes_cut"] += sum(gap[3] - gap[0] for gap in skel.gaps)
            if parse._parse_skeleton("python", data, skel).root_node.has_error:
                note("files_fallback_whole_parse", rel)
        counts["defs_full"] += len(full.definitions)
        counts["defs_skeleton"] += len(new.definitions)
        counts["imports_full"] += len(full.imports)
        counts["imports_skeleton"] += len(new.imports)
        if full.has_errors != new.has_errors:
            note("has_errors_differs", rel)
        by_key = {(d.start_line, d.start_col, d.name): d for d in new.definitions}
        kinds_by_q = {d.qualname: d.kind for d in full.definitions}
        for d in full.definitions:
            other = by_key.pop((d.start_line, d.start_col, d.name), None)
            where = f"{rel}:{d.start_line + 1} {d.kind} {d.qualname}"
            if other is None:
                outer = [".".join(d.qualname.split(".")[:i]) for i in range(1, d.qualname.count(".") + 1)]
                nested = any(kinds_by_q.get(q) in ("function", "method") for q in outer)
                note("defs_only_full_nested_in_function" if nested else "defs_only_full_other", where)
            elif other != d:
                fields = [f for f in d._fields if getattr(d, f) != getattr(other, f)]
                was = [getattr(d, f) for f in fields]
                now = [getattr(other, f) for f in fields]
                note("defs_differ", f"{where}: {fields} {was} -> {now}")
        for d in by_key.values():
            note("defs_only_skeleton", f"{rel}:{d.start_line + 1} {d.kind} {d.qualname}")
        imp_full = Counter((i.flavor, i.spec, i.names, i.line, i.wildcard) for i in full.imports)
        imp_new = Counter((i.flavor, i.spec, i.names, i.line, i.wildcard) for i in new.imports)
        for imp in (imp_full - imp_new).elements():
            note("imports_only_full", f"{rel}:{imp[3] + 1} {imp[:3]}")
        for imp in (imp_new - imp_full).elements():
            note("imports_only_skeleton", f"{rel}:{imp[3] + 1} {imp[:3]}")
    result = {
        "tree": str(args.tree),
        "counts": dict(counts),
        "cpu_s": {k: round(v, 3) for k, v in cpu.items()},
        "examples": examples,
    }
    text = json.dumps(result, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    sys.exit(main())
