"""``${package_dir:NAME}``: a preset reads data an installed wheel ships (BFCL's multi-turn cases) wherever pip put it,
and a missing package is named."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

import ao_calib.core.shipped  # noqa: F401 -- registers the resolver


def test_an_installed_package_resolves_to_its_folder():
    cfg = OmegaConf.create({"path": "${package_dir:omegaconf}/version.py"})
    assert Path(cfg.path).is_file() and Path(cfg.path).parent.name == "omegaconf"


def test_a_missing_package_is_named():
    cfg = OmegaConf.create({"path": "${package_dir:no_such_package_here}/data"})
    with pytest.raises(Exception, match="no_such_package_here.*not installed"):
        _ = cfg.path
