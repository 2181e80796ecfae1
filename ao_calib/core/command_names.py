"""How a printed hint names one of the project's commands: the way the user started this process, so that the hint
can be pasted back. ``ao-calib <command>`` in a process started through the console script (``ao_calib.cli``),
``python -m ao_calib.<command>`` otherwise."""

from __future__ import annotations

SCRIPT = "ao-calib"
_through_script = False  # set once, by ao_calib.cli.main, before it runs a command


def started_through_script() -> None:
    """The console script's entry point calls this before it hands over to a command."""
    global _through_script
    _through_script = True


def command(name: str) -> str:
    """``name`` (a command of ``ao_calib.cli.COMMANDS``: run, eval, report, plot, score, export) as this process's
    user types it."""
    return f"{SCRIPT} {name}" if _through_script else f"python -m ao_calib.{name}"
