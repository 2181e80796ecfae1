"""``python -m MODULE ARGS`` for the tests, forked from a process that has already imported the heavy libraries.

Each command-line run a test starts used to pay for importing torch, transformers, TRL, peft, datasets, wandb and
the tasks anew (8-12 s of CPU a run). Here one server process per test process imports them once (and freezes
what they made, so that a child's garbage collections skip it) and forks a child for every run: the child is a
real, separate process (its own exit status, environment, working directory, signal handlers and output files),
started from the state a fresh interpreter has after those imports and nothing else: the server builds no model,
computes nothing and configures no logging before it forks.

Only a run in the test process's own environment is forked, from a server started with that very environment
(libraries read some variables, such as HF_HUB_OFFLINE, at import time), give or take the variables in
``RUN_TIME_VARIABLES``, which nothing reads before a run starts; a run given other variables of its own goes to a
plain subprocess, as does everything when ``AO_CALIB_TEST_FORK=0`` or the platform has no ``fork``.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

# The server: reads one JSON request per line, answers one JSON line per finished run.
SERVER = r"""
import json, os, runpy, signal, sys, time, traceback

# Replies go out on a copy of the pipe; whatever a library prints goes to stderr, never into a reply.
reply = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

import datasets, peft, torch, transformers, trl  # noqa: F401  what every run would import
import ao_calib.models.loading, ao_calib.run, ao_calib.trainers  # noqa: F401
import ao_calib.models.fast_generation  # noqa: F401  TRL's trainers, imported when a task loads
import ao_calib_tasks.function_call.task, ao_calib_tasks.oracle.task, ao_calib_tasks.tool_json.task  # noqa: F401
import wandb  # noqa: F401  imported by every run (transformers' is_wandb_available), started by none here
import matplotlib.backends.backend_agg, matplotlib.figure  # noqa: F401  every evaluation's plots

def pythonpath():
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]

def child(req):
    code = 1
    try:
        os.setpgid(0, 0)  # its own process group, so a timeout also stops what it started
        reply.close()
        os.chdir(req["cwd"])
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, req["stdout"]), (2, req["stderr"])):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(target, fd)
            os.close(target)
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", buffering=1, closefd=False)
        sys.stderr = open(2, "w", buffering=1, closefd=False)
        inherited = pythonpath()
        os.environ.clear()
        os.environ.update(req["env"])
        # PYTHONPATH's folders go where a fresh interpreter puts them: after the working directory, before the rest
        sys.path[1:1 + len(inherited)] = pythonpath()
        sys.argv = [req["module"], *req["args"]]
        sys.path[0] = req["cwd"]  # as `python -m` puts the working directory first
        try:
            runpy.run_module(req["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as stop:
            if stop.code is None or isinstance(stop.code, int):
                code = stop.code or 0
            else:  # sys.exit("message"): printed, status 1, as the interpreter does
                print(stop.code, file=sys.stderr)
                code = 1
        except BaseException:
            traceback.print_exc()
            code = 1
        import atexit
        atexit._run_exitfuncs()  # what an interpreter's exit runs (loggers, wandb's offline writer)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)

# What the imports made is never garbage: a child's collections (accelerate's free_memory runs one) skip it.
import gc
gc.collect()
gc.freeze()

for line in sys.stdin:
    req = json.loads(line)
    reply.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    deadline = time.monotonic() + req["timeout"]
    status = None
    while True:
        done, raw = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(raw)
            break
        if time.monotonic() > deadline:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            break
        time.sleep(0.02)
    reply.write(json.dumps({"returncode": status}) + "\n")
    reply.flush()
"""


class Zygote:
    """One server process for this test process, started on first use, stopped when the test process exits."""

    def __init__(self, cwd: Path, env: dict):
        self.env = dict(env)
        self.folder = Path(tempfile.mkdtemp(prefix="ao_calib_cli_"))
        self.server = subprocess.Popen([sys.executable, "-c", SERVER], cwd=cwd, env=self.env, text=True,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.count = 0
        self.lock = threading.Lock()  # one run at a time: a reply answers the request before it
        atexit.register(self.close)

    def serves(self, env: dict) -> bool:
        return self.server.poll() is None and _settled(env) == _settled(self.env)

    def run(self, cwd: Path, module: str, args: list[str], env: dict, timeout: float
            ) -> subprocess.CompletedProcess:
        with self.lock:
            return self._run(cwd, module, args, env, timeout)

    def _run(self, cwd: Path, module: str, args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        request = {"module": module, "args": list(args), "env": env, "cwd": str(cwd), "timeout": timeout,
                   "stdout": str(out), "stderr": str(err)}
        self.server.stdin.write(json.dumps(request) + "\n")
        self.server.stdin.flush()
        line = self.server.stdout.readline()
        if not line:
            raise RuntimeError(f"the test's command server stopped (status {self.server.poll()})")
        returncode = json.loads(line)["returncode"]
        stdout, stderr = (p.read_text(errors="replace") if p.is_file() else "" for p in (out, err))
        for path in (out, err):
            path.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", module, *args]
        if returncode is None:
            raise subprocess.TimeoutExpired(cmd, timeout, output=stdout, stderr=stderr)
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)

    def close(self) -> None:
        if self.server.poll() is None:
            self.server.stdin.close()
            try:
                self.server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.server.kill()
        shutil.rmtree(self.folder, ignore_errors=True)


# Read when a run runs, never on importing what the server imports: a forked run sets them itself (the child gets
# exactly the run's environment), so a run that adds them is still forked. PYTHONPATH: see the server's child().
RUN_TIME_VARIABLES = frozenset({"OPENAI_API_KEY", "PYTHONPATH", "SLURM_RESTART_COUNT", "AO_CALIB_PROBE_KEY"})


def _settled(env: dict) -> dict:
    """``env`` less what pytest rewrites for every test and what a forked run sets itself (the child still gets
    both, as a subprocess would)."""
    return {k: v for k, v in env.items() if k != "PYTEST_CURRENT_TEST" and k not in RUN_TIME_VARIABLES}


_zygote: Zygote | None = None


def run_module(cwd: Path, module: str, args: list[str], env: dict, timeout: float) -> subprocess.CompletedProcess:
    """``python -m module args`` in ``cwd`` with exactly ``env``. A run in this process's own environment is
    forked from the server (restarted first when that environment has changed since it started: a test's
    monkeypatch, or the framework called in-process setting its offline variables); a run with variables of its
    own is a plain subprocess."""
    global _zygote
    if os.environ.get("AO_CALIB_TEST_FORK", "1") != "0" and hasattr(os, "fork") and _settled(env) == _settled(
            dict(os.environ)):
        if _zygote is not None and not _zygote.serves(env):
            _zygote.close()
            _zygote = None
        if _zygote is None:
            try:
                _zygote = Zygote(cwd, env)
            except OSError:  # no temp folder to write the runs' output to (TMPDIR pointed at a removed one)
                _zygote = None
        if _zygote is not None:
            return _zygote.run(cwd, module, args, env, timeout)
    return subprocess.run([sys.executable, "-m", module, *args], check=False, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)
