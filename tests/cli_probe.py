"""A command for tests/commands/test_cli_zygote.py: ``python -m tests.cli_probe [sleep=S] [exit=N|message=TEXT|raise]``
prints what a process started for a test should see (its parent, working directory, arguments, two variables,
sys.path)."""

import json
import os
import sys
import time

if __name__ == "__main__":
    print(f"ppid={os.getppid()} cwd={os.getcwd()} argv0={os.path.basename(sys.argv[0])} "
          f"probe={os.environ.get('AO_CALIB_PROBE')} key={os.environ.get('AO_CALIB_PROBE_KEY')}")
    print(f"path={json.dumps(sys.path, separators=(',', ':'))}")
    print("to stderr", file=sys.stderr)
    for arg in sys.argv[1:]:
        key, _, value = arg.partition("=")
        if key == "sleep":
            time.sleep(float(value))
        elif key == "exit":
            sys.exit(int(value))
        elif key == "message":
            sys.exit(value)
        elif key == "raise":
            raise RuntimeError("probe failed")
