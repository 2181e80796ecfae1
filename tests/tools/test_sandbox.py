"""The Python sandbox (``ao_calib.tools.sandbox``): model-written code that loops, forks, allocates, floods its
output, reads or writes outside its directory, looks for the trainer's secrets or opens a socket is stopped or
refused with a tool-result message, and the trainer's process is unharmed (its environment, its files, no process or
folder left behind)."""

from __future__ import annotations

import os
import socket
import tempfile
import time
from pathlib import Path

import pytest

from ao_calib.tools.sandbox import SandboxLimits, run_python

LIMITS = SandboxLimits(cpu_seconds=1, wall_seconds=3.0)


@pytest.fixture(autouse=True)
def trainer_unharmed(monkeypatch):
    """Each call leaves the trainer as it found it: a secret still set here, no sandbox folder left in the temporary
    directory, no child process left running."""
    monkeypatch.setenv("AO_CALIB_TEST_API_KEY", "sk-parent-secret")
    before = set(Path(tempfile.gettempdir()).glob("ao_calib_sandbox_*"))
    yield
    assert os.environ["AO_CALIB_TEST_API_KEY"] == "sk-parent-secret"
    assert set(Path(tempfile.gettempdir()).glob("ao_calib_sandbox_*")) == before
    assert not sandbox_processes()


def sandbox_processes() -> list[int]:
    """Processes still running the sandbox's child script, whoever their parent (a fork's orphan included)."""
    found = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if b"sandbox_child.py" in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def refused(code: str, limits: SandboxLimits = LIMITS) -> str:
    result = run_python(code, limits)
    assert not result.ok, result
    assert result.tool_result().startswith(result.output) and result.error in result.tool_result()
    return result.error


def test_plain_code_runs_and_prints():
    result = run_python("import math, json\nprint(json.dumps([math.factorial(5), 2 ** 10]))", LIMITS)
    assert result.ok and result.output == "[120, 1024]\n" and result.tool_result() == "[120, 1024]\n"


def test_an_exception_comes_back_as_its_last_line_after_what_was_printed():
    result = run_python("print('before')\n1 / 0", LIMITS)
    assert result.tool_result() == "before\n\nError: ZeroDivisionError: division by zero"
    assert refused("def f(:") == "SyntaxError: invalid syntax"


def test_an_infinite_loop_stops_at_the_cpu_limit():
    started = time.monotonic()
    assert refused("while True:\n    pass") == "CPU time limit of 1 s exceeded"
    assert time.monotonic() - started < LIMITS.wall_seconds


def test_a_sleeping_call_stops_at_the_wall_clock_limit():
    assert refused("import time\ntime.sleep(60)", SandboxLimits(wall_seconds=1.0)) == \
        "wall-clock limit of 1 s exceeded"


def test_a_loop_that_catches_the_cpu_signal_is_killed_a_second_later():
    code = "import signal\nsignal.signal(signal.SIGXCPU, lambda *a: None)\nwhile True:\n    pass"
    assert refused(code).startswith("killed: CPU time limit")


@pytest.mark.parametrize("code", ["import os\nwhile True:\n    os.fork()",
                                  "import os\nos.system('echo hi')",
                                  "import subprocess\nsubprocess.run(['ls'])",
                                  "import multiprocessing"])
def test_a_fork_bomb_and_every_way_to_start_a_process_are_refused(code):
    assert "sandbox:" in refused(code) and "not allowed" in refused(code)


def test_a_gigabyte_allocation_fails_inside_the_call():
    assert refused("x = bytearray(10**9)\nprint(len(x))") == "MemoryError"


def test_100_mb_of_output_is_stopped_and_cut():
    result = run_python("import sys\nsys.stdout.write('x' * 100_000_000)", LIMITS)
    assert not result.ok and result.error == f"output or a file over {LIMITS.file_bytes} bytes"
    cut = "\n[output cut]"
    assert len(result.output) <= LIMITS.output_bytes + len(cut) and result.output.endswith(cut)


@pytest.mark.parametrize("path", ["/etc/passwd", "/proc/self/environ", "../outside.txt"])
def test_files_outside_its_directory_cannot_be_read(path):
    assert refused(f"print(open({path!r}).read())").startswith("PermissionError: sandbox: open(")


def test_the_trainers_environment_is_not_inherited():
    result = run_python("import os\nprint(sorted(os.environ))", LIMITS)
    assert result.ok and "AO_CALIB_TEST_API_KEY" not in result.output and "sk-parent" not in result.output
    parent = os.getpid()
    assert refused(f"print(open('/proc/{parent}/environ').read())").startswith("PermissionError: sandbox: open(")


def test_writing_outside_its_directory_is_refused_and_inside_is_allowed(tmp_path):
    target = tmp_path / "escaped.txt"
    assert refused(f"open({str(target)!r}, 'w').write('x')").startswith("PermissionError: sandbox: open(")
    assert refused(f"import os\nos.rename('.', {str(target)!r})").startswith("PermissionError: sandbox: os.rename")
    assert not target.exists()
    inside = run_python("open('notes.txt', 'w').write('kept')\nprint(open('notes.txt').read())", LIMITS)
    assert inside.ok and inside.output == "kept\n"
    assert run_python("import os\nprint(os.listdir('.'))", LIMITS).output == "[]\n"  # a fresh folder each call


def test_a_network_socket_cannot_be_opened():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        for code in (f"import socket\nsocket.create_connection(('127.0.0.1', {port}))",
                     "import _socket\n_socket.socket()",
                     "import ctypes"):
            assert "not allowed" in refused(code)
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()  # nothing reached the trainer's listener


def test_bad_calls_are_answered_not_raised():
    assert run_python(None, LIMITS).error == "code must be a string, got NoneType"
    assert "longer than" in run_python("x" * 70_000, LIMITS).error
