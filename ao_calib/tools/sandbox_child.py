"""The child side of ``ao_calib.tools.sandbox``: run as a script (``python -I -S sandbox_child.py LIMITS``) with the
model's code on stdin, never imported by the trainer. It lowers its own resource limits, installs an audit hook that
refuses what the code may not do, then runs the code. Standard library only, as ``-I -S`` leaves no other."""

import json
import os
import resource
import signal
import sys
import sysconfig

# Audit events that start a process, load native code or add a hook: refused whatever their arguments.
REFUSED_EVENTS = {
    "os.fork", "os.forkpty", "os.posix_spawn", "os.exec", "os.spawn", "os.system", "os.kill", "os.killpg",
    "subprocess.Popen", "pty.spawn", "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "sys.addaudithook",
    "socket.__new__", "socket.bind", "socket.connect", "socket.getaddrinfo", "socket.gethostbyname",
    "socket.sendto", "_thread.start_new_thread", "os.putenv", "os.unsetenv", "mmap.__new__",
}
REFUSED_MODULES = {"ctypes", "_ctypes", "socket", "_socket", "ssl", "_ssl", "subprocess", "_posixsubprocess",
                   "multiprocessing", "_multiprocessing", "pty", "mmap"}
# Events whose first argument is a path the code may touch only inside its directory.
PATH_EVENTS = {"os.remove", "os.rmdir", "os.mkdir", "os.rename", "os.symlink", "os.link", "os.chmod", "os.chown",
               "os.truncate", "os.utime", "os.chdir", "os.listdir", "os.scandir", "shutil.rmtree", "shutil.copyfile",
               "shutil.move", "shutil.copytree"}
TWO_PATH_EVENTS = {"os.rename", "os.symlink", "os.link", "shutil.copyfile", "shutil.move", "shutil.copytree"}


def set_limits(limits: dict) -> None:
    """Soft and hard alike, so the code cannot raise them again."""
    for name, value in (("RLIMIT_AS", limits["memory_bytes"]), ("RLIMIT_FSIZE", limits["file_bytes"]),
                        ("RLIMIT_NOFILE", limits["open_files"]), ("RLIMIT_NPROC", 0), ("RLIMIT_CORE", 0)):
        resource.setrlimit(getattr(resource, name), (value, value))
    signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it; a write past the file limit then stops the call
    # SIGXCPU at the soft limit (reported as such); SIGKILL a second later if the code catches it
    resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 1))


def audit_hook(work: str):
    readable = tuple(os.path.realpath(p) + os.sep for p in {sysconfig.get_paths()["stdlib"],
                                                             sysconfig.get_paths()["platstdlib"]})

    def inside(path, roots) -> bool:
        if isinstance(path, int):  # an open descriptor (stdin, stdout, stderr)
            return True
        full = os.path.realpath(os.fsdecode(path))
        return any((full + os.sep).startswith(root) for root in roots)

    def hook(event: str, args: tuple) -> None:
        if event in REFUSED_EVENTS:
            raise PermissionError(f"sandbox: {event} is not allowed")
        if event == "import" and args[0].split(".")[0] in REFUSED_MODULES:
            raise PermissionError(f"sandbox: import {args[0]} is not allowed")
        if event == "open":
            path, mode = args[0], args[1] or "r"
            writes = any(c in str(mode) for c in "wax+") or (isinstance(args[2], int) and args[2] & (
                os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC))
            if path is None or inside(path, (work + os.sep,)) or (not writes and inside(path, readable)):
                return
            raise PermissionError(f"sandbox: open({os.fsdecode(path)!r}) is outside its directory")
        if event in PATH_EVENTS:
            for path in args[:2] if event in TWO_PATH_EVENTS else args[:1]:
                if isinstance(path, (str, bytes, os.PathLike)) and not inside(path, (work + os.sep,)):
                    raise PermissionError(f"sandbox: {event}({os.fsdecode(path)!r}) is outside its directory")

    return hook


def main() -> None:
    limits = json.loads(sys.argv[1])
    code = sys.stdin.read()
    work = os.path.realpath(os.getcwd())
    source = compile(code, "<tool call>", "exec")  # a syntax error is reported before any limit bites
    set_limits(limits)
    sys.addaudithook(audit_hook(work))
    # the model's code runs here, in this sandboxed child, never in the trainer's process
    exec(source, {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102


if __name__ == "__main__":
    main()
