"""A key a schema lists as moved is refused naming its new key, and a saved run's config is moved over."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from omegaconf import OmegaConf

from ao_calib.config.compose import moved_keys, renamed_keys
from ao_calib.core.errors import AOCalibError


@dataclass
class Rows:
    none_fraction: float = 0.0


@dataclass
class Old:
    renamed_keys = {"sft_none_fraction": "warmup_rows.none_fraction"}
    warmup_rows: Rows = field(default_factory=Rows)


@dataclass
class Newer(Old):
    renamed_keys = {"rl_none_fraction": "rl_rows.none_fraction"}


def test_a_moved_key_is_refused_naming_its_new_key():
    node = OmegaConf.create({"sft_none_fraction": 0.2})
    with pytest.raises(AOCalibError, match=r"task\.sft_none_fraction has moved: set task\.warmup_rows\.none_fraction"):
        moved_keys(node, Old, "task")


def test_a_saved_config_is_moved_to_the_new_key():
    node = OmegaConf.create({"sft_none_fraction": 0.2, "warmup_rows": {"other": 1}})
    moved_keys(node, Old, "task", migrate=True)
    assert OmegaConf.to_container(node) == {"warmup_rows": {"other": 1, "none_fraction": 0.2}}


def test_a_schema_inherits_the_keys_its_parents_moved():
    assert renamed_keys(Newer) == {"sft_none_fraction": "warmup_rows.none_fraction",
                                   "rl_none_fraction": "rl_rows.none_fraction"}
    moved_keys(OmegaConf.create({"warmup_rows": {"none_fraction": 0.1}}), Newer, "task")  # the new key passes
