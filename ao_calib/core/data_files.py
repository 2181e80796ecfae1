"""Reading a task's data file: a missing file and bytes that are not UTF-8 are refused in one message naming the
file (and the line), instead of a traceback from deep inside a loader."""

from __future__ import annotations

from pathlib import Path

from ao_calib.core.errors import AOCalibError, MissingDataFileError


def read_data_text(path: str | Path, what: str) -> str:
    """The text of a UTF-8 data file (a byte-order mark is dropped). ``what`` names the file for the message."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataFileError(f"{what} not found: {path}")
    raw = path.read_bytes()
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise AOCalibError(f"{path}: line {line}: not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset "
                           f"{exc.start}); save the file as UTF-8") from None
