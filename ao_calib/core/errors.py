"""Errors a user can act on. The CLI prints these as one clear message instead of a traceback."""

from __future__ import annotations


class AOCalibError(Exception):
    """Base class for problems caused by input or environment, not by a bug in ao_calib."""


class DataValidationError(AOCalibError):
    """A dataset row is malformed. Names the file, the row (0-based) and the field."""

    def __init__(self, source: str, row: int, field: str | None, reason: str):
        self.source, self.row, self.field, self.reason = source, row, field, reason
        where = f"{source}: row {row}" + (f", field '{field}'" if field else "")
        super().__init__(f"{where}: {reason}")


class ResourceUnavailableError(AOCalibError):
    """A run needs something this machine lacks (GPU, model hub, API key)."""

    @classmethod
    def lacking(cls, who: str, missing: list[str], hint: str) -> ResourceUnavailableError:
        """``who`` needs each of ``missing``, one a line (a GPU recipe on a CPU machine lacks several), then ``hint``:
        what to run instead."""
        return cls(f"{who} needs:\n" + "".join(f"  - {item}\n" for item in missing) + hint)


class MissingDataFileError(AOCalibError, FileNotFoundError):
    """A configured data file does not exist: one line, exit 2. Still a FileNotFoundError, so a loader that falls
    back to another source on a missing file keeps doing so."""


class RemoteError(AOCalibError):
    """Another process's error, raised on this one: ``distributed.on_main`` hands the main process's error to every
    process as its type's name, its text and its traceback's text (the exception object itself may not pickle: one
    holding a lambda would lose the text on every rank). The message names the type and the text; the remote
    traceback is kept in ``remote_traceback`` and shown as a note where a traceback is printed."""

    def __init__(self, rank: int, type_name: str, text: str, remote_traceback: str = ""):
        self.rank, self.type_name, self.text, self.remote_traceback = rank, type_name, text, remote_traceback
        super().__init__((f"{type_name}: {text}" if text else type_name) + f" (raised on rank {rank})")
        if remote_traceback:
            self.add_note(f"rank {rank}'s traceback:\n{remote_traceback.rstrip()}")

    def __reduce__(self):  # picklable again (its own __init__ takes four arguments)
        return type(self), (self.rank, self.type_name, self.text, self.remote_traceback)
