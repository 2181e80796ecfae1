"""The config a ``python -m ao_calib.run`` command line composes, composed as Hydra's run will compose it but before
Hydra starts: a run (or ``--cfg job``) that the start-up checks refuse stops before Hydra makes its run directory,
and an override Hydra cannot apply is refused in the project's words (``ao_calib.config.override_errors``)."""

from __future__ import annotations

from collections.abc import Callable

from ao_calib.config.compose import CONF_DIR
from ao_calib.config.override_errors import composition_error

# Hydra's flags under which no job config is composed, or one from a config folder of the user's (Hydra composes it)
NOT_COMPOSED = ("help", "hydra_help", "info", "shell_completion", "experimental_rerun", "config_path", "config_dir")


def check_command_line(argv: list[str], check: Callable) -> None:
    """Composes the job config ``argv`` asks for and hands it to ``check`` as a run's task gets it: Hydra's node set
    aside in ``HydraConfig``, Hydra's config loader still in place (a recipe check asks it which options exist).
    Nothing is checked where no job is run or shown (``--help``, ``--info``, another config folder), and only the
    composition under ``--cfg hydra``. Sweep values (``-m key=a,b``) are left out: each job checks its own."""
    from hydra import compose, initialize_config_dir
    from hydra._internal.utils import get_args_parser  # hydra.main's own reading of the command line
    from hydra.core.hydra_config import HydraConfig
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import CompactHydraException
    from omegaconf import open_dict

    args = get_args_parser().parse_args(argv)
    if any(getattr(args, flag, None) for flag in NOT_COMPOSED):
        return
    with initialize_config_dir(config_dir=str(CONF_DIR), job_name="run", version_base="1.3"):
        try:
            overrides = [override.input_line for override in OverridesParser.create().parse_overrides(args.overrides)
                         if not override.is_sweep_override()]
            cfg = compose(args.config_name or "config", overrides, return_hydra_config=True)
        except CompactHydraException as exc:
            raise composition_error(exc) from None
        if args.cfg == "hydra":
            return
        HydraConfig.instance().set_config(cfg)
        with open_dict(cfg):
            del cfg["hydra"]
        check(cfg)
