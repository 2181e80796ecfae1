"""Where the configs (``conf/``) and data (``data/``) shipped with ao_calib are found: the copies a non-editable
install puts inside the package (``ao_calib/conf``, ``ao_calib/data``: pyproject.toml maps the clone's top-level
folders there), else the clone's own folders (a run from the clone, an editable install)."""

from __future__ import annotations

from pathlib import Path

from omegaconf import OmegaConf

PACKAGE_DIR = Path(__file__).resolve().parents[1]
CLONE_ROOT = PACKAGE_DIR.parent
SHIPPED = ("conf", "data")


def shipped_dir(name: str) -> Path:
    """The folder ``name`` (conf or data): the installed package's copy when there is one, else the clone's. The
    packaged copy is looked for first: a folder named ``data`` beside the package in site-packages is not ours."""
    if name not in SHIPPED:
        raise ValueError(f"no shipped folder {name!r}; shipped: {', '.join(SHIPPED)}")
    packaged = PACKAGE_DIR / name
    return packaged if packaged.is_dir() else CLONE_ROOT / name


def shipped_places(name: str) -> tuple[Path, Path]:
    """(the installed package's copy, the clone's) of ``name``: where an error says it looked."""
    return PACKAGE_DIR / name, CLONE_ROOT / name


def package_dir(name: str) -> Path:
    """The folder of the installed package ``name`` (data a wheel ships, e.g. ``bfcl_eval``'s cases), or an error
    naming it."""
    import importlib.util

    spec = importlib.util.find_spec(name)
    if spec is None or not spec.origin:
        raise ValueError(f"a setting reads files of the package {name!r}, which is not installed here (see the "
                         "README's install section for the extras it comes with)")
    return Path(spec.origin).parent


# ${ao_calib_shipped:data}: the data folder a preset reads its shipped files from (paths.data_dir)
OmegaConf.register_new_resolver("ao_calib_shipped", lambda name: str(shipped_dir(name)), replace=True)
# ${package_dir:bfcl_eval}: an installed package's folder (a preset that scores data a wheel ships)
OmegaConf.register_new_resolver("package_dir", lambda name: str(package_dir(name)), replace=True)
