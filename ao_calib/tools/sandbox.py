"""Model-written Python, run where it cannot harm the trainer: one child process per call (``sandbox_child``), in
an empty temporary directory removed afterwards, with a clean environment (no inherited secrets), its own session
(the whole group is killed at the end), lowered resource limits (CPU time, address space, file and output size,
open files, no new processes) and an audit hook that refuses sockets, processes, native code and any path outside
its directory; run as ``nobody`` where the trainer is root and ``nobody`` can start its Python. Nothing here raises
on the model's account: every failure comes back as the text a tool result shows.

Defence in depth for a model's mistakes, not a boundary against a determined attacker (that takes a VM or gVisor):
see docs/concepts/tools.md."""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ao_calib.core.settings import at_least, setting

log = logging.getLogger(__name__)
CHILD = Path(__file__).with_name("sandbox_child.py")
NOBODY = 65534


@dataclass(frozen=True)
class SandboxLimits:
    cpu_seconds: int = setting(2, "CPU seconds a call may use before it is killed.", allowed=at_least(1))
    wall_seconds: float = setting(5.0, "Seconds of wall-clock time a call may take before its processes are "
                                       "killed.", allowed=at_least(0.5))
    memory_bytes: int = setting(512 * 2**20, "Address space of the call's process (Python itself takes ~30 MB).",
                                allowed=at_least(64 * 2**20))
    output_bytes: int = setting(16 * 2**10, "Printed output kept for the tool result (stdout and stderr); a call "
                                            "that writes more is stopped.", allowed=at_least(256))
    file_bytes: int = setting(2**20, "Largest file a call may write, its printed output included (more stops it).",
                              allowed=at_least(1024))
    open_files: int = setting(32, "Open file descriptors a call may hold.", allowed=at_least(8))
    code_bytes: int = setting(64 * 2**10, "Longest code accepted.", allowed=at_least(16))


@dataclass(frozen=True)
class SandboxResult:
    ok: bool
    output: str  # what the code printed (stdout), cut to the output limit
    error: str | None = None  # the failure as a tool result shows it (the exception's last line, or the limit hit)

    def tool_result(self) -> str:
        if self.ok:
            return self.output
        return f"{self.output}\nError: {self.error}" if self.output else f"Error: {self.error}"


def run_python(code: str, limits: SandboxLimits = SandboxLimits()) -> SandboxResult:
    """Runs ``code`` in a fresh sandboxed child; what it printed, or why it failed."""
    if not isinstance(code, str):
        return SandboxResult(False, "", f"code must be a string, got {type(code).__name__}")
    if len(code.encode()) > limits.code_bytes:
        return SandboxResult(False, "", f"code longer than {limits.code_bytes} bytes")
    root = Path(tempfile.mkdtemp(prefix="ao_calib_sandbox_"))
    try:
        return _run_in(root, code, limits)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _run_in(root: Path, code: str, limits: SandboxLimits) -> SandboxResult:
    work = root / "work"
    work.mkdir()
    as_nobody = _nobody_can_run()
    if as_nobody:
        os.chown(work, NOBODY, NOBODY)
    # Output goes to files the size limit bounds (a child that prints more is stopped by SIGXFSZ), read back cut.
    with open(root / "stdout", "w+b") as out, open(root / "stderr", "w+b") as err:
        try:
            child = subprocess.Popen(
                [sys.executable, "-I", "-S", "-B", str(CHILD), json.dumps(asdict(limits))],
                stdin=subprocess.PIPE, stdout=out, stderr=err, cwd=work, env={"LC_ALL": "C.UTF-8"},
                start_new_session=True, close_fds=True, **({"user": NOBODY, "group": NOBODY, "extra_groups": []}
                                                           if as_nobody else {}))
        except OSError as exc:
            return SandboxResult(False, "", f"the sandbox could not start: {exc}")
        timed_out = False
        try:
            child.communicate(code.encode(), timeout=limits.wall_seconds)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:
            _kill_group(child.pid)
            child.wait()
        printed = _read(out, limits.output_bytes)
        errors = _read(err, limits.output_bytes)
    status = child.returncode
    if timed_out:
        return SandboxResult(False, printed, f"wall-clock limit of {limits.wall_seconds:g} s exceeded")
    if status == 0:
        return SandboxResult(True, printed)
    if status == -signal.SIGXCPU:
        return SandboxResult(False, printed, f"CPU time limit of {limits.cpu_seconds} s exceeded")
    if status == -signal.SIGXFSZ:
        return SandboxResult(False, printed, f"output or a file over {limits.file_bytes} bytes")
    if status == -signal.SIGKILL:  # the hard CPU limit, a second past the soft one, or the kernel out of memory
        return SandboxResult(False, printed, f"killed: CPU time limit of {limits.cpu_seconds} s or memory exceeded")
    if status < 0:
        return SandboxResult(False, printed, f"killed by signal {signal.Signals(-status).name}")
    return SandboxResult(False, printed, _last_error_line(errors) or f"exit status {status}")


@functools.cache
def _nobody_can_run() -> bool:
    """Whether the child runs as ``nobody``: only where the trainer is root (which ignores the process limit and
    reads every file) and ``nobody`` can start this Python (not when it lives under a private /root)."""
    if os.geteuid() != 0:
        return False
    with tempfile.TemporaryDirectory() as folder:
        os.chown(folder, NOBODY, NOBODY)
        try:
            probe = subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], cwd=folder, env={}, timeout=30,
                                   capture_output=True, check=False, user=NOBODY, group=NOBODY, extra_groups=[])
        except (OSError, subprocess.SubprocessError):
            probe = None
    if probe is None or probe.returncode != 0:
        log.warning("tool sandbox: the trainer runs as root and user nobody cannot start %s: calls run as root, "
                    "kept in by the audit hook and resource limits alone (docs/concepts/tools.md)", sys.executable)
        return False
    return True


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read(handle, limit: int) -> str:
    handle.seek(0)
    data = handle.read(limit + 1)
    text = data[:limit].decode("utf-8", errors="replace")
    return text + ("\n[output cut]" if len(data) > limit else "")


def _last_error_line(stderr: str) -> str:
    """The exception line of a traceback ("ZeroDivisionError: division by zero"), the code's own frames aside."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""
