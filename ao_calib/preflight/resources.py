"""What a run needs from this machine, checked before anything heavy loads: the model's GPU and hub files, the
task's hub data sets and the judge's credentials, all reported in one message (exit 2), one missing thing a line."""

from __future__ import annotations

from omegaconf import DictConfig

from ao_calib.core.command_names import command
from ao_calib.core.errors import AOCalibError, ResourceUnavailableError
from ao_calib.core.plugins import plugin_class

# Groups a recipe (conf/recipe/) sets by merging their files: a command-line choice of one would be merged over.
RECIPE_GROUPS = ("judge", "warmup", "logger")


def check_resources(cfg: DictConfig, hub_datasets, adapter: str | None) -> None:
    """Everything the run needs from this machine (the model, ``adapter``, the task's ``hub_datasets``, the
    judge's credentials), reported in one message."""
    from ao_calib.models import loading as models  # torch: not at import, so that --help and composition stay fast

    missing = models.missing_for_model(cfg.model, adapter)
    missing += [f"the data set '{name}'" + models.NOT_ON_HUB for name in hub_datasets
                if not models.hub_repo_available(name, repo_type="dataset")]
    judge_class = plugin_class("judge", cfg.judge.get("_target_"))
    if judge_class is not None and hasattr(judge_class, "missing_resources"):
        missing += judge_class.missing_resources(cfg.judge)
    if missing:
        raise ResourceUnavailableError.lacking(
            f"this run (task={cfg.task.name} model={cfg.model.name} judge={cfg.judge.name})", missing,
            offline_recipe_hint() if _recipe() else models.offline_hint())


def offline_recipe_hint() -> str:
    return ("The same recipe offline on this machine (a tiny model, a stand-in pretrained oracle, a judge server of "
            f"your own): {command('run')} experiment=oracle_seed_tiny (docs/concepts/oracle.md, \"The pretrained "
            "oracle offline\")")


def _recipe() -> str | None:
    """The design-note recipe (conf/recipe/) this run composed, if any."""
    from hydra.core.hydra_config import HydraConfig

    if not HydraConfig.initialized():
        return None
    from hydra.core.global_hydra import GlobalHydra

    choice = HydraConfig.get().runtime.choices.get("recipe")
    # The optional entry records its name even where no such file exists (task=function_call model=qwen3_8b).
    loader = GlobalHydra.instance().config_loader() if GlobalHydra.instance().is_initialized() else None
    return choice if choice and (loader is None or choice in loader.get_group_options("recipe")) else None



def check_recipe_choices() -> None:
    """A recipe merges its judge, warm-up and logger over whatever the command line chose for those groups, so such
    a choice is refused with the way to make it count."""
    recipe = _recipe()
    if not recipe:
        return
    from hydra.core.hydra_config import HydraConfig

    chosen = [o for o in HydraConfig.get().overrides.task if o.split("=")[0].lstrip("+~") in RECIPE_GROUPS]
    if chosen:
        raise AOCalibError(f"recipe/{recipe} sets the judge, warm-up and logger itself, so {', '.join(chosen)} would "
                           "not take effect: add ~recipe to the command to compose your own (the recipe's other "
                           "settings then fall back to the defaults), or drop the override")
