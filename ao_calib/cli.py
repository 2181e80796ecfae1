"""``ao-calib <command> [arguments]``: one entry point for the project's commands, each the same as
``python -m ao_calib.<command>`` (which keeps working). The command's module is imported only when it is called, so
``ao-calib --help`` stays fast."""

from __future__ import annotations

import difflib
import importlib
import runpy
import sys
from collections.abc import Sequence

from ao_calib.core.command_names import started_through_script

# command: (module, entry function taking the arguments, or None: run as `python -m <module>`; what it does)
COMMANDS = {
    "run": ("ao_calib.run", None, "train, evaluate and record one run, or a sweep with -m (Hydra overrides)"),
    "eval": ("ao_calib.eval", "main", "re-evaluate a saved run: eval run_dir=PATH [option=value ...]"),
    "report": ("ao_calib.reporting.report", "main", "tabulate run directories (one run or a sweep): report DIR"),
    "plot": ("ao_calib.reporting.plot", "main", "plot one run's training curves: plot RUN [out=FILE]"),
    "score": ("ao_calib.score", "main", "score completions with a task's checker, no model: score task=NAME ..."),
    "export": ("ao_calib.export", "main", "take a finished run's adapter or merged model away: export run_dir=PATH"),
}


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: ao-calib <command> [arguments]   (the same as python -m ao_calib.<command>)", "", "commands:"]
    lines += [f"  {name:<{width}}  {what}" for name, (_, _, what) in COMMANDS.items()]
    lines += ["", "ao-calib <command> --help shows a command's own options (ao-calib run --help trainer.lr: one key)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(), file=sys.stdout if args else sys.stderr)
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        close = difflib.get_close_matches(name, COMMANDS, n=1)
        hint = f" Did you mean {close[0]}?" if close else ""
        print(f"error: no command {name!r}.{hint} Commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    module, function, _ = COMMANDS[name]
    started_through_script()  # the command's hints then name `ao-calib <command>`, as the user typed it
    if function is None:
        # Run as `python -m` runs it: Hydra reads the overrides from sys.argv
        sys.argv = [sys.argv[0], *rest]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        return 0
    return getattr(importlib.import_module(module), function)(rest) or 0


if __name__ == "__main__":
    sys.exit(main())
