"""What a run leaves behind for people: its summary file and the end-of-run screen."""

from __future__ import annotations

import logging
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ao_calib.io import write_json
from ao_calib.run_dir import RunDir

log = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parents[2]


def git_commit() -> str | None:
    """The code's commit, with ``-dirty`` when the work tree has uncommitted changes."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                             timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=PROJECT_ROOT,
                               capture_output=True, text=True, timeout=10).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


@dataclass
class RunSummary:
    run_dir: RunDir
    started: float = field(default_factory=time.time)
    wandb_run_id: str | None = None
    git_commit: str | None = field(default_factory=git_commit)

    def write(self, status: str, final_metrics: dict | None = None, eval_metrics: dict | None = None,
              error: str | None = None, extra: dict | None = None) -> dict:
        summary = {
            "status": status,
            "wall_time_s": round(time.time() - self.started, 2),
            "started_at": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(self.started)),
            "git_commit": self.git_commit,
            "wandb_run_id": self.wandb_run_id,
            "run_dir": str(self.run_dir.path),
            "final_metrics": final_metrics or {},
            "eval_metrics": eval_metrics or {},
            **({"error": error} if error else {}),
            **(extra or {}),
        }
        write_json(self.run_dir.summary, summary)
        return summary


def print_final_screen(summary: dict) -> None:
    fm, em = summary["final_metrics"], summary["eval_metrics"]
    rewards = {k.split("/")[1]: v for k, v in fm.items() if k.startswith("rewards/") and k.endswith("/mean")}
    headline = (f" final train reward {fm['reward']:.3f}" if fm.get("reward") is not None
                else f" final train loss {fm.get('train_loss', fm.get('loss', float('nan'))):.3f}")
    lines = ["", "=" * 72, f" run {summary['status']} in {summary['wall_time_s']:.0f}s",
             headline + "".join(f" | {k} {v:.3f}" for k, v in rewards.items() if v is not None)]
    if em:
        lines.append(" eval: " + " | ".join(f"{k} {v:.3f}" for k, v in em.items()))
    lines += [f" run directory: {summary['run_dir']}",
              f" curves: python -m ao_calib.plot {summary['run_dir']}", "=" * 72]
    print("\n".join(lines), flush=True)
