"""One ``ao_calib.run`` per seed, for the experiments that train a preset several times and tabulate the runs
(experiments.oracle_learning, experiments.oracle_reading): their shared options, the runs and their wall times."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--seeds``, ``--keep``, ``--write`` and the extra overrides every run takes."""
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--keep", type=Path, default=None,
                        help="keep the run directories here (and reuse the completed ones)")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    parser.add_argument("overrides", nargs="*", help="extra overrides for every run (an ablation)")


def train(out: Path, overrides: list[str], log: Path | None = None) -> float | None:
    """Wall seconds of ``python -m ao_calib.run hydra.run.dir=<out> <overrides>``, or None when ``out`` already
    holds a completed run (``--keep`` reused: seeds can be trained by separate processes, then tabulated
    together). The run's output goes to ``log``, else it is captured."""
    summary = out / "summary.json"
    if summary.is_file() and json.loads(summary.read_text()).get("status") == "completed":
        return None
    start = time.perf_counter()
    command = [sys.executable, "-m", "ao_calib.run", f"hydra.run.dir={out}", *overrides]
    if log is None:
        subprocess.run(command, cwd=ROOT, check=True, capture_output=True)
    else:
        with log.open("w") as output:
            subprocess.run(command, cwd=ROOT, check=True, stdout=output, stderr=subprocess.STDOUT)
    return time.perf_counter() - start


NOT_TIMED = "not timed here (runs reused from --keep)"


def each_seed(seeds: list[int], keep: Path | None, run_seed: Callable[[int, Path], tuple[float | None, Any]],
              markdown: Callable[[dict[int, Any]], list[str]]) -> tuple[list[str], list[float]]:
    """``run_seed(seed, out)`` (its wall seconds or None, and its result) for each seed, ``out`` being
    ``seed<N>`` under ``keep`` or under a temporary folder removed afterwards. Each seed's table
    (``markdown({seed: result})``) is printed as it finishes, then the whole table; returns the whole table's lines
    and the wall times measured."""
    results, walls = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        root = keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        for seed in seeds:
            wall, results[seed] = run_seed(seed, root / f"seed{seed}")
            walls.append(wall)
            print("\n".join(markdown({seed: results[seed]})), flush=True)
    lines = markdown(results)
    print("\n".join(lines))
    return lines, [w for w in walls if w is not None]


def with_overrides(command: str, overrides: list[str]) -> str:
    """The command written beside a table, with the run's extra overrides."""
    return command + (" " + " ".join(overrides) if overrides else "")


def write_table(args: argparse.Namespace, section: str, lines: list[str], note: str, command: str) -> None:
    """With ``--write``: the seeds' table and its note into that file's ``section``, beside the command that made it
    (with the runs' extra overrides)."""
    if args.write:
        from bench.report import update_benchmarks

        update_benchmarks(args.write, section, [*lines, "", note], command=with_overrides(command, args.overrides))
