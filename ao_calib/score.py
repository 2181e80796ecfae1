"""``python -m ao_calib.score task=NAME input=IN.jsonl output=OUT.jsonl [config overrides]``: score anyone's
completions with a task's checker and rewards, no model involved.

Each input row carries what the task needs plus a ``completion`` string; for ``task=function_call`` that is a
BFCL case: ``id``, ``question``, ``function``, ``possible_answer`` (BFCL's ground-truth list) and ``completion``.
Each output row keeps every input field and adds ``valid`` (bool) and the reward components. A bad row stops the
run before anything is written, with the file, line and field named (exit 2). Other words are config overrides,
as for ``ao_calib.run`` (e.g. ``task.strict_format=false``).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path

from ao_calib.errors import AOCalibError
from ao_calib.io import read_jsonl

USAGE = "usage: python -m ao_calib.score task=NAME input=IN.jsonl output=OUT.jsonl [config overrides]"


def parse_args(argv: list[str]) -> tuple[Path, Path, list[str]]:
    paths: dict[str, str] = {}
    overrides = []
    for arg in argv:
        key, sep, value = arg.partition("=")
        if key in ("input", "output") and sep:
            paths[key] = value
        else:
            overrides.append(arg)
    missing = [k for k in ("input", "output") if not paths.get(k)]
    if missing:
        raise AOCalibError(f"{' and '.join(k + '=' for k in missing)} required\n{USAGE}")
    if not any(o.startswith("task=") for o in overrides):
        raise AOCalibError(f"task= is required (e.g. task=function_call)\n{USAGE}")
    return Path(paths["input"]), Path(paths["output"]), overrides


def score_file(task, source: Path, target: Path) -> dict:
    """Scores every row, then writes them all (nothing is written when a row is bad). Returns a summary."""
    scored = []
    for index, (line_no, row) in enumerate(read_jsonl(source, "input file")):
        added = task.score_row(row, str(source), index, line_no)
        if "category" in row:  # the input's own category wins; the task's is only a fill-in
            added.pop("category", None)
        scored.append({**row, **added})
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in scored), encoding="utf-8")
    partial.replace(target)
    by_category: dict[str, list[bool]] = defaultdict(list)
    for row in scored:
        by_category[str(row.get("category", "all"))].append(bool(row["valid"]))
    return {"rows": len(scored), "valid": sum(r["valid"] for r in scored) / len(scored),
            "by_category": {c: sum(v) / len(v) for c, v in sorted(by_category.items())}}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(USAGE + "\n\n" + (__doc__ or "").split("\n\n", 1)[1].strip())
        return 0
    try:
        source, target, overrides = parse_args(argv)
        from ao_calib.config import compose_run_config
        from ao_calib.task_api import build_task

        try:
            cfg = compose_run_config(overrides)
        except AOCalibError:
            raise
        except Exception as exc:  # noqa: BLE001 -- Hydra's composition errors name the bad override
            raise AOCalibError(f"config: {str(exc).splitlines()[0]}") from None
        summary = score_file(build_task(cfg), source, target)
    except AOCalibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(f"scored {summary['rows']} rows -> {target}; valid: {summary['valid']:.3f}")
    for category, accuracy in summary["by_category"].items():
        print(f"  {category:24} {accuracy:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
