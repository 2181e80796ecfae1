"""A ``python -m ao_calib.run`` process a test signals while it runs: started as ``run_cli`` starts one (forked from
the test process's command server, so no run pays for importing torch and transformers again), from a thread that
waits for it; the test finds the process by the id the run writes into its summary.json."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.commands import run_cli


class BackgroundRun:
    def __init__(self, run_dir: Path, *overrides: str, timeout: float):
        self.run_dir = run_dir
        self._result: subprocess.CompletedProcess | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(overrides, timeout), daemon=True)
        self._thread.start()

    def _run(self, overrides: tuple[str, ...], timeout: float) -> None:
        try:
            self._result = run_cli("ao_calib.run", *overrides, timeout=timeout)
        except BaseException as exc:  # re-raised in the test's own thread by result()
            self._error = exc

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait_for(self, condition: Callable[[], bool], what: str, timeout: float, poll_s: float = 0.05) -> None:
        deadline = time.time() + timeout
        while not condition():
            if not self.running():
                done = self.result(0)
                pytest.fail(f"the run ended (rc {done.returncode}) before {what}:\n{done.stdout[-2000:]}\n"
                            f"{done.stderr[-3000:]}")
            if time.time() > deadline:
                self.stop()
                pytest.fail(f"timed out waiting for {what}")
            time.sleep(poll_s)

    def pid(self) -> int:
        """The process that wrote summary.json: this run once the test has waited for one of its own files."""
        summary = json.loads((self.run_dir / "summary.json").read_text())
        assert summary["status"] == "running", summary
        return int(summary["pid"])

    def send(self, sig: int) -> None:
        os.kill(self.pid(), sig)

    def stop(self) -> None:
        """Ends a run that overran (run_cli's own timeout would otherwise end it, much later)."""
        try:
            self.send(signal.SIGKILL)
        except (OSError, AssertionError, ValueError):  # no summary yet, or the run already ended
            pass

    def result(self, timeout: float) -> subprocess.CompletedProcess:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the run did not end within {timeout} s"
        if self._error is not None:
            raise self._error
        return self._result
