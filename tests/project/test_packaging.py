"""A non-editable install carries the configs and the shipped data: the wheel built from the clone holds every
``conf/`` file and the tracked ``data/`` folders (nothing generated beside them), and the package unpacked from it
composes a preset from its own copies, launched from an empty folder. (.ci/run installs the wheel into a fresh
environment and runs the quickstart smoke run from an empty folder.)"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers.paths import PROJECT_ROOT

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "ao_calib", "tasks", "conf", "data")
SHIPPED_DATA = ("ao_classification", "bfcl_v4_real", "bfcl_v4_real_validation")  # for users, not test fixtures


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """The wheel pip builds from a copy of the clone's sources (the build writes build/ and egg-info beside them),
    with a folder of generated data under data/ that must stay out."""
    source = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        if (PROJECT_ROOT / name).is_dir():
            shutil.copytree(PROJECT_ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(PROJECT_ROOT / name, source / name)
    (source / "data" / "tool_json").mkdir(exist_ok=True)
    (source / "data" / "tool_json" / "train.json").write_text("[]")
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(source)],
                            capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return next(out.glob("ao_calib-*.whl"))


@functools.cache
def names_in(wheel: Path) -> set[str]:
    return set(zipfile.ZipFile(wheel).namelist())


def test_the_wheel_holds_every_config_file(wheel):
    configs = files_under(PROJECT_ROOT / "conf")
    assert "config.yaml" in configs and "experiment/quickstart.yaml" in configs
    packaged = {name.removeprefix("ao_calib/conf/") for name in names_in(wheel) if name.startswith("ao_calib/conf/")}
    assert packaged == configs


def test_the_wheel_holds_the_shipped_data_and_nothing_generated(wheel):
    shipped = {f"{folder}/{name}" for folder in SHIPPED_DATA for name in files_under(PROJECT_ROOT / "data" / folder)}
    assert "ao_classification/paraphrases/question.json" in shipped
    packaged = {name.removeprefix("ao_calib/data/") for name in names_in(wheel) if name.startswith("ao_calib/data/")}
    assert packaged == shipped


def test_the_unpacked_package_reads_its_own_copies_from_an_empty_folder(wheel, tmp_path):
    site, empty = tmp_path / "site", tmp_path / "empty"
    zipfile.ZipFile(wheel).extractall(site)
    (site / "ao_calib" / "conf" / "experiment" / "packaged_only.yaml").write_text("# @package _global_\n")
    empty.mkdir()
    # the unpacked package comes before the clone's editable one on the path
    env = {**os.environ, "PYTHONPATH": str(site)}
    for variable in ("AO_CALIB_ROOT", "AO_CALIB_CACHE"):
        env.pop(variable, None)

    def run(*args: str) -> str:
        result = subprocess.run([sys.executable, *args], cwd=empty, env=env, capture_output=True, text=True,
                                timeout=300, check=False)
        assert result.returncode == 0, result.stderr[-3000:]
        return result.stdout

    assert "packaged_only" in run("-m", "ao_calib.run", "--help")  # Hydra's config folder is the package's copy
    code = ("from hydra import compose, initialize_config_dir; "
            "from ao_calib.config.compose import CONF_DIR, register_schemas; "
            "from ao_calib_tasks.oracle.classification.catalog import shipped_data_dir; register_schemas(); "
            "initialize_config_dir(config_dir=str(CONF_DIR), version_base='1.3'); "
            "cfg = compose('config', ['experiment=function_call_smollm2']); "
            "print(cfg.task.data.extra_test_path, cfg.paths.output_dir, shipped_data_dir())")
    assert run("-c", code).split() == [f"{site}/ao_calib/data/bfcl_v4_real", "./outputs",  # runs under the cwd
                                       str(site / "ao_calib" / "data" / "ao_classification")]
    assert list(empty.iterdir()) == []
