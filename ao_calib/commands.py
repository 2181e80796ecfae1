"""The shared shell of the ``key=value`` commands (``ao_calib.eval``, ``ao_calib.export``): ``--help`` prints the
usage, and a config or data error is one line on stderr with exit status 2, not a traceback."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

from ao_calib.errors import AOCalibError


def key_value_command(argv: list[str] | None, usage: Callable[[], str], action: Callable[[list[str]], object]) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("-h", "--help", "help") for a in argv):
        print(usage())
        return 0
    logging.basicConfig(level=logging.INFO, format="[%(levelname)s] %(name)s: %(message)s")
    try:
        action(argv)
    except AOCalibError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0
