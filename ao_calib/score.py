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
from dataclasses import dataclass
from pathlib import Path

from ao_calib.core.command_options import Command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import read_jsonl
from ao_calib.core.settings import Checked, setting


@dataclass
class ScoreArgs(Checked):
    task: str = setting(help="The task whose checker and rewards score the rows (e.g. function_call).")
    input: str = setting(help="The JSONL file of rows to score, each with a completion string.")
    output: str = setting(help="The JSONL file to write, every input field kept; written only when every row "
                          "scores (not a folder).")

    def __post_init__(self) -> None:
        super().__post_init__()
        if not Path(self.input).is_file():
            raise AOCalibError(f"input file not found: {self.input}")
        if Path(self.output).is_dir():
            raise AOCalibError(f"output={self.output} is a folder: name the JSONL file to write")


OPTIONS = ("task", "input", "output")
COMMAND = Command(
    "ao_calib.score", ScoreArgs, "task=NAME input=IN.jsonl output=OUT.jsonl [config overrides]",
    " ".join((__doc__ or "").split("\n\n", 1)[1].split()).replace("``", "`"),
    examples=("task=function_call input=completions.jsonl output=scored.jsonl task.strict_format=false",),
    passes_on=lambda word: word.partition("=")[0] not in OPTIONS,
    passed_help=(("KEY=VALUE", "Config overrides, as for ao_calib.run (e.g. task.strict_format=false); a key the "
                               "config lacks is refused."),))


def compose(overrides: list[str]):
    """The run config the task is built from; an override the config refuses is named."""
    from ao_calib.config.compose import compose_run_config

    try:
        return compose_run_config(overrides)
    except AOCalibError:
        raise
    except Exception as exc:  # noqa: BLE001 -- Hydra's composition errors name the bad override
        bare = [o for o in overrides[1:] if "." not in o.partition("=")[0].lstrip("+~")]
        hint = (f" ({', '.join(bare)}: not an option of ao_calib.score ({', '.join(OPTIONS)}) nor a config key)"
                if bare else "")
        raise AOCalibError(f"config: {str(exc).splitlines()[0]}{hint}") from None


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
    return COMMAND.main(argv, _score_and_say)


def _score_and_say(args: ScoreArgs, overrides: list[str]) -> None:
    from ao_calib.task_api import build_task

    source, target = Path(args.input), Path(args.output)
    summary = score_file(build_task(compose([f"task={args.task}", *overrides])), source, target)
    print(f"scored {summary['rows']} rows -> {target}; valid: {summary['valid']:.3f}")
    for category, accuracy in summary["by_category"].items():
        print(f"  {category:24} {accuracy:.3f}")


if __name__ == "__main__":
    sys.exit(main())
