"""What a run leaves behind for people: its summary file and the end-of-run screen."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ao_calib.core.command_names import command
from ao_calib.core.io import nulls_as_nan, write_json
from ao_calib.evaluation.config import ClosingTable
from ao_calib.reporting.closing_table import evaluation_table
from ao_calib.runs.run_dir import RunDir, read_json
from ao_calib.runtime import distributed

log = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git_commit() -> str | None:
    """The code's commit, with ``-dirty`` when the work tree has uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10, check=False).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class RunSummary:
    """summary.json. ``status`` is "running" (with the process id and host, so ``ao_calib.report`` can tell a
    crashed run from a live one), "completed", "failed" (with the error) or "interrupted" (with the signal).

    Only the main process writes it. Another process that fails leaves its error in ``RunDir.rank_failure``; the
    main's closing status is then "failed" with that error, whatever stopped the main process itself (an error in
    a collective, or the launcher's SIGTERM)."""

    run_dir: RunDir
    started: float = field(default_factory=time.time)
    wandb_run_id: str | None = None
    git_commit: str | None = field(default_factory=git_commit)
    resumed_from: str | None = None  # the checkpoint this process resumed from
    model: dict | None = None  # what was loaded: name, class, where from, parameter counts (models.describe)

    def previous(self) -> dict | None:
        """What an earlier process of this run wrote (a resume reads its wandb run id and status)."""
        return read_json(self.run_dir.summary)

    def write(self, status: str, final_metrics: dict | None = None, eval_metrics: dict | None = None,
              error: str | None = None, extra: dict | None = None, signal: str | None = None) -> dict:
        summary = {
            "status": status,
            "wall_time_s": round(time.time() - self.started, 2),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started)),
            "git_commit": self.git_commit,
            "wandb_run_id": self.wandb_run_id,
            "run_dir": str(self.run_dir.path),
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "final_metrics": final_metrics or {},
            "eval_metrics": eval_metrics or {},
            **({"model": self.model} if self.model else {}),
            **({"resumed_from": self.resumed_from} if self.resumed_from else {}),
            **({"signal": signal} if signal else {}),
            **({"error": error} if error else {}),
            **(extra or {}),
        }
        if not distributed.is_main():
            if status == "failed":
                write_json(self.run_dir.rank_failure(distributed.rank()), {"error": error, "host": summary["host"],
                                                                           "pid": summary["pid"]})
            return summary
        if status in ("failed", "interrupted"):
            others = self.run_dir.rank_failures()
            if others:
                summary.update(status="failed", error="; ".join(
                    [f"rank {r}: {info.get('error')}" for r, info in others.items()]
                    + ([f"rank 0: {error}"] if error else [])))
        write_json(self.run_dir.summary, summary)
        return summary


def evaluation_rows(run_dir: RunDir) -> list[tuple[str, dict]]:
    """(tag, metrics) of each evaluation the run wrote, in pipeline order (initial, stages, final); the control
    variant's accuracy becomes ``control``, the ``none`` variant's accuracy, mean confidence and ECE ``none``,
    ``none_mean_confidence`` and ``none_ece``, a tool task's ``silent_tools`` variant's accuracy ``silent_tools``; a
    second held-out set's rows follow, as ``<tag> (extra test)``."""
    reports = {}
    for path in run_dir.path.glob("eval*.json"):
        report = read_json(path)
        if isinstance(report, dict) and isinstance(report.get("metrics"), dict):
            metrics = dict(report["metrics"])
            variants = report.get("variants") or {}
            control, none = variants.get("control") or {}, variants.get("none") or {}
            if "accuracy" in control:
                metrics["control"] = control["accuracy"]
            silent = variants.get("silent_tools") or {}
            if "accuracy" in silent:  # the same episodes with tools that return nothing
                metrics["silent_tools"] = silent["accuracy"]
            if "accuracy" in none:  # random vectors in place of the activations: what no reading can beat
                metrics["none"] = none["accuracy"]
                metrics.update({f"none_{k}": none[k] for k in ("mean_confidence", "ece") if k in none})
            extra_set = report.get("extra_test") or {}
            extra = (extra_set.get("metrics"), extra_set.get("split") or "test")
            reports[report.get("tag", path.stem)] = (path.stat().st_mtime, metrics, extra)
    ordered = sorted(reports.items(), key=lambda kv: (kv[0] != "initial", kv[0] == RunDir.FINAL, kv[1][0]))
    # A task's second held-out set (task.data.extra_test_path, or extra_validation_path on a validation run): one
    # row per evaluation, after the main rows.
    return ([(tag, metrics) for tag, (_, metrics, _) in ordered]
            + [(f"{tag} (extra {split})", extra) for tag, (_, _, (extra, split)) in ordered if extra])


def _per_dataset_table(run_dir: RunDir, table: ClosingTable) -> list[str]:
    """The final evaluation's figures per dataset (its ``per_dataset``), where it has them: where the answers can be
    read and whether the stated number knows it (``readability_table``, beside the probe's validation accuracy),
    and with ``table`` full every confidence method's figures too."""
    from ao_calib.calibration.per_dataset import figures_table, readability_table

    path = run_dir.eval_report()
    report = (read_json(path) or {}) if path.is_file() else {}
    figures = report.get("per_dataset")
    if not figures:
        return []
    figures = nulls_as_nan(figures)  # an undefined figure reads n/a, not - (missing)
    lines = ["", " per dataset (final evaluation; probe: a linear probe's validation accuracy, text-only: the best "
             "rule reading the question alone):", readability_table(figures, report.get("probe_validation_accuracy")),
             ""]
    if table == ClosingTable.full:
        lines += [" every confidence method per dataset (final evaluation):", figures_table(figures), ""]
    return lines


def print_final_screen(summary: dict, table: ClosingTable = ClosingTable.headline) -> None:
    """The closing block: alerts with what to do, the table of every evaluation (``table``: eval.closing_table)
    with its legend, then where the files are."""
    fm = summary["final_metrics"]
    rewards = {k.split("/")[1]: v for k, v in fm.items() if k.startswith("rewards/") and k.endswith("/mean")}
    headline = (f" final train reward {fm['reward']:.3f}" if fm.get("reward") is not None
                else f" final train loss {fm.get('train_loss', fm.get('loss', float('nan'))):.3f}")
    lines = ["", "=" * 72, f" run {summary['status']} in {summary['wall_time_s']:.0f}s",
             headline + "".join(f" | {k} {v:.3f}" for k, v in rewards.items() if v is not None)]
    for name, alert in (summary.get("alerts") or {}).items():
        when = "at start-up" if alert.get("step") == 0 else f"step {alert.get('step')}"  # a check before training
        lines.append(f" ALERT {name} ({when}): {alert['message']}")
    if summary.get("selection"):  # eval.select_metric: each stage's chosen step
        from ao_calib.evaluation.selection import selection_lines

        lines += selection_lines(summary["selection"])
    rows = evaluation_rows(RunDir(summary["run_dir"]))
    if rows:
        lines += ["", *evaluation_table(rows, table), ""]
    lines += _per_dataset_table(RunDir(summary["run_dir"]), table)
    lines += [f" run directory: {summary['run_dir']}",
              f" curves: {command('plot')} {summary['run_dir']}", "=" * 72]
    print("\n".join(lines), flush=True)
