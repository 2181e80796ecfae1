"""Signals that end a run cleanly. SIGTERM and SIGUSR1 (what SLURM sends before preemption) during training ask
the trainer to save a checkpoint at the end of the current step and stop; anywhere else they end the run at once.
Either way the run is recorded as "interrupted" with the signal's name, and whatever handler was there before
(a launcher's checkpoint-and-requeue) is called afterwards."""

from __future__ import annotations

import signal
from collections.abc import Callable

STOP_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)


class RunInterrupted(BaseException):
    """A stop signal ended the run. A BaseException, like KeyboardInterrupt, so no ``except Exception`` in a
    library swallows it."""

    def __init__(self, signal_name: str, detail: str = ""):
        super().__init__(f"interrupted by {signal_name}" + (f": {detail}" if detail else ""))
        self.signal_name = signal_name

    @property
    def exit_code(self) -> int:
        return 128 + int(getattr(signal, self.signal_name, signal.SIGTERM))


class SignalWatch:
    """Installed for the length of a run. ``training`` says whether a trainer can stop at a step boundary."""

    def __init__(self):
        self.received: str | None = None
        self.training = False
        self._previous: dict[int, Callable | int | None] = {}

    def install(self) -> SignalWatch:
        for sig in STOP_SIGNALS:
            self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous.clear()

    def _handle(self, signum, frame) -> None:
        self.received = signal.Signals(signum).name
        if not self.training:
            raise RunInterrupted(self.received)

    def hand_over(self) -> None:
        """Calls the handler that was installed before ours for the signal received (a launcher requeues the
        job there), after the run has recorded itself as interrupted."""
        if self.received is None:
            return
        signum = int(getattr(signal, self.received))
        previous = self._previous.get(signum)
        self.uninstall()
        if callable(previous):
            previous(signum, None)
