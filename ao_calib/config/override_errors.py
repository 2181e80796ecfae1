"""An override a run cannot take, refused in the project's words: an unknown key names the closest keys (the engine
``--help <key>`` uses, ``ao_calib.core.spelling``), an unknown option of a group lists the options a user can pick
(its config files, no ``*_schema`` entry), and neither suggests Hydra's ``+key=value``, which would only add the
misspelt key."""

from __future__ import annotations

from ao_calib.config import help_text
from ao_calib.core.command_names import command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.spelling import closest


def unknown_keys_error(keys: list[str]) -> AOCalibError:
    """The one message unknown keys are refused with, however they were given (``key=value``, ``+key=value``)."""
    sections = help_text.settings_sections()
    rows = {row.key: row for _, _, group_rows in sections for row in group_rows}
    group = keys[0].split(".")[0]
    listed = f"--help {group}" if group in {name for name, _, _ in sections} else "--help"
    return AOCalibError(f"unknown config key(s): {', '.join(key + _hint(key, rows) for key in keys)} "
                        f"(`{command('run')} {listed}` lists the keys)")


def _hint(key: str, rows: dict) -> str:
    row = rows.get(key)
    if row is not None:  # another option of the group has it: trainer.beta under trainer=sft
        return f" (a key of {key.split('.')[0]}={', '.join(row.options)} only)" if row.options else ""
    close = closest(key, rows, limit=3)
    return f" (did you mean {', '.join(close)}?)" if close else ""


def unknown_option_error(group: str, option: str, options) -> AOCalibError:
    """``group=option`` that names no config file of the group: the options a user can pick, the closest first."""
    picks = help_text.user_options(options)
    close = closest(option, picks, limit=3)
    hint = f" Did you mean: {', '.join(close)}?" if close else ""
    ordered = close + [name for name in picks if name not in close]
    return AOCalibError(f"no {group} option {option!r}.{hint} Options: {', '.join(ordered)}")


def composition_error(exc: Exception) -> AOCalibError:
    """Hydra's error composing a command line's config (``CompactHydraException``), in the project's words."""
    from hydra.errors import MissingConfigException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    cause = exc.__cause__
    if isinstance(exc, MissingConfigException) and exc.options and exc.missing_cfg_file:
        group, _, option = exc.missing_cfg_file.rpartition("/")
        return unknown_option_error(group, option, exc.options)
    if isinstance(cause, (ConfigAttributeError, ConfigKeyError)) and getattr(cause, "full_key", None):
        return unknown_keys_error([cause.full_key])  # Hydra's advice, +key=value, would add the misspelt key
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    reason = str(cause).splitlines()[0] if cause is not None and str(cause) else ""
    return AOCalibError(" ".join(lines) + (f": {reason}" if reason else ""))
