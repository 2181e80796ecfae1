"""Checkpoints: whether one is whole, its step and stage, and where a run starts (fresh, resumed, or from another run's
adapter)."""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ao_calib.core.errors import AOCalibError
from ao_calib.runs.records import as_number
from ao_calib.runs.run_dir import WARMUP, RunDir, log, read_json

TRAINER_STATE = "trainer_state.json"


def checkpoint_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a whole checkpoint (missing trainer state, truncated weights or optimizer state), or
    None when it is one. Reads headers only."""
    path = Path(path)
    if not path.is_dir():
        return "no such checkpoint directory"
    try:
        state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
        int(state["global_step"])
    except FileNotFoundError:
        return f"no {TRAINER_STATE} (the save did not finish)"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{TRAINER_STATE} is unreadable ({type(exc).__name__})"
    weights = sorted(path.rglob("*.safetensors"))
    if not weights:
        return "no weights file (*.safetensors)"
    from safetensors import safe_open

    for file in weights:
        try:
            with safe_open(str(file), "pt") as f:
                f.keys()
        except Exception as exc:  # noqa: BLE001 -- SafetensorError and OSError alike mean a damaged file
            return f"{file.relative_to(path)} is damaged ({str(exc).splitlines()[0]})"
    for file in path.glob("*.pt"):  # torch.save writes zip archives: a truncated one has no central directory
        if not zipfile.is_zipfile(file):
            return f"{file.name} is damaged (truncated)"
    return None


def checkpoint_step(path: str | Path) -> int:
    return int(json.loads((Path(path) / TRAINER_STATE).read_text(encoding="utf-8"))["global_step"])


def resolve_checkpoint(setting: str | None, run_dir: RunDir) -> str | None:
    """``trainer.resume_from_checkpoint``: null; "latest", the newest whole checkpoint of this run directory (a
    damaged newer one is skipped with a warning naming it); or a path, refused in one message when damaged."""
    if setting is None:
        return None
    if setting != "latest":
        problem = checkpoint_problem(setting)
        if problem:
            raise AOCalibError(f"trainer.resume_from_checkpoint={setting}: {problem}; name another checkpoint or "
                               "use trainer.resume_from_checkpoint=latest (the newest whole one)")
        return str(setting)
    # the main stage's newest, else (a run stopped before the main stage saved one) the warm-up's
    for candidate in [*reversed(run_dir.checkpoint_dirs()), *reversed(run_dir.checkpoint_dirs(WARMUP))]:
        problem = checkpoint_problem(candidate)
        if problem is None:
            log.info("resuming from %s", candidate)
            return str(candidate)
        log.warning("resume_from_checkpoint=latest: skipping %s: %s", candidate, problem)
        print(f"warning: checkpoint {candidate} is damaged ({problem}); falling back to an older one", flush=True)
    log.warning("resume_from_checkpoint=latest: no whole checkpoint in %s, starting from scratch", run_dir)
    return None


def checkpoint_stage(checkpoint: str | Path, run_dir: RunDir) -> str:
    """The stage a checkpoint of this run belongs to: the warm-up's when it lies in its folder, else the main
    stage's ("train")."""
    inside = Path(checkpoint).resolve().parent
    return WARMUP if inside == run_dir.checkpoints(WARMUP).resolve() else "train"


@dataclass
class StartPoint:
    """Where a run starts: from scratch, from a checkpoint (``step``), or nowhere (``finished``: the summary of a
    run that already completed what it is asked to do)."""

    resuming: bool = False
    checkpoint: str | None = None
    step: int | None = None
    finished: dict | None = None
    stage: str = "train"  # the stage the checkpoint (and step) belong to: "warmup" when the main stage saved none


def start_point(setting: str | None, run_dir: RunDir, max_steps: int) -> StartPoint:
    """Decides at start-up, before any model loads: a fresh run (``setting`` null) needs a directory no run has
    written to; a resume takes the checkpoint ``setting`` names (see ``resolve_checkpoint``); resuming a run that
    already completed ``max_steps`` has nothing left to do."""
    if setting is None:
        leftovers = run_dir.leftovers()
        if leftovers:
            shown = ", ".join(leftovers[:5]) + (", ..." if len(leftovers) > 5 else "")
            raise AOCalibError(f"{run_dir} already holds a run ({shown}). Either resume it: add "
                               "trainer.resume_from_checkpoint=latest; or start a fresh run in a new directory: "
                               "leave hydra.run.dir unset (each run gets its own) or name an empty one")
        return StartPoint()
    checkpoint = resolve_checkpoint(setting, run_dir)
    step = checkpoint_step(checkpoint) if checkpoint else None
    stage = checkpoint_stage(checkpoint, run_dir) if checkpoint else "train"
    previous = read_json(run_dir.summary) or {}
    done = as_number((previous.get("final_metrics") or {}).get("step"))
    if previous.get("status") == "completed" and done is not None and done >= max_steps:
        return StartPoint(True, checkpoint, step, finished=previous)
    return StartPoint(True, checkpoint, step, stage=stage)
