"""Hydra callbacks: a sweep writes its comparison table when the last job ends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig

log = logging.getLogger(__name__)


class SweepSummaryCallback(Callback):
    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        from ao_calib.reporting.report import write_report

        sweep_dir = Path(config.hydra.sweep.dir)
        try:
            paths = write_report(sweep_dir)
            log.info("sweep summary: %s", ", ".join(str(p) for p in paths.values()))
            print(f"sweep summary written: {paths.get('md')}", flush=True)
        except Exception as exc:  # noqa: BLE001 -- a summary failure must not hide the jobs' own results
            log.warning("could not write the sweep summary for %s: %s", sweep_dir, exc)
