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


class NotImplementedYetError(AOCalibError):
    """A configured option exists in the design but is not built yet."""


class ResourceUnavailableError(AOCalibError):
    """A run needs something this machine lacks (GPU, model hub, API key)."""


class MissingDataFileError(AOCalibError, FileNotFoundError):
    """A configured data file does not exist: one line, exit 2. Still a FileNotFoundError, so a loader that falls
    back to another source on a missing file keeps doing so."""
