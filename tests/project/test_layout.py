"""The layout's rules: the rooms of ``ao_calib/`` and which may import which (the commands on top, nothing
importing a command), the framework never imports a task, no module imports itself back through others, and every
package folder is installed."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

from tests.helpers.paths import PROJECT_ROOT

ROOTS = {"ao_calib": PROJECT_ROOT / "ao_calib", "ao_calib_tasks": PROJECT_ROOT / "tasks"}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in ROOTS.items():
        for path in folder.rglob("*.py"):
            parts = [package, *path.relative_to(folder).with_suffix("").parts]
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def type_checking_only(tree: ast.AST) -> set[ast.AST]:
    """The nodes under ``if TYPE_CHECKING:``: imports for annotations only, which never run."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            found |= {inner for stmt in node.body for inner in ast.walk(stmt)}
    return found


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Project modules ``name`` imports anywhere in its body (function-level imports included; imports for type
    annotations only, under ``if TYPE_CHECKING:``, left out)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    tree = ast.parse(path.read_text())
    skipped = type_checking_only(tree)
    for node in ast.walk(tree):
        if node in skipped:
            continue
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        out |= {t for t in targets if t in known and t != name}
    return out


# The rooms of ao_calib/ (subpackages, and the two modules of the API task authors import) and the rooms each may
# import, bottom up: a room imports only rooms listed before it. The commands sit on top and may import any room.
ROOMS = {
    "core": set(),
    "runtime": {"core"},
    "runs": {"core"},
    "judges": {"core"},
    "rewards": {"core"},
    "steering": {"core", "runtime"},
    "tools": {"core"},
    "calibration": {"core", "judges", "rewards"},
    "monitoring": {"core", "judges", "runtime"},
    "models": {"core", "runs", "runtime", "steering"},
    "evaluation": {"calibration", "core", "models", "monitoring", "runs", "runtime", "tools"},
    "preflight": {"core", "models", "runtime"},
    "trainers": {"calibration", "core", "evaluation", "models", "monitoring", "rewards", "runs", "runtime",
                 "steering", "tools"},
    "reporting": {"calibration", "core", "evaluation", "runs", "runtime"},
    "config": {"calibration", "core", "evaluation", "judges", "models", "monitoring", "runs", "runtime", "trainers"},
    "task_api": {"calibration", "config", "core", "evaluation", "judges", "models", "rewards", "runs", "tools"},
}
COMMANDS = {"run", "eval", "export", "score", "report", "plot", "cli"}


def room_of(module: str) -> str | None:
    """The room of an ``ao_calib`` module (its subpackage, or a top-level module's name); None for the package."""
    parts = module.split(".")
    return parts[1] if parts[0] == "ao_calib" and len(parts) > 1 else None


def test_the_top_level_holds_the_commands_and_the_task_api():
    top = {p.stem for p in (PROJECT_ROOT / "ao_calib").glob("*.py")} - {"__init__"}
    assert top == COMMANDS | {"task_api", "rewards"}
    folders = {p.name for p in (PROJECT_ROOT / "ao_calib").iterdir() if (p / "__init__.py").is_file()}
    assert folders == set(ROOMS) - {"task_api", "rewards"}


def test_each_room_imports_only_the_rooms_below_it():
    order = list(ROOMS)
    assert all(order.index(dep) < order.index(room) for room, deps in ROOMS.items() for dep in deps)
    crossing = set()
    for name, targets in project_graph().items():
        room = room_of(name)
        if room is None or room in COMMANDS:
            continue
        crossing |= {(name, target) for target in targets if room_of(target) not in (None, room, *ROOMS[room])}
    assert crossing == set()


def test_nothing_but_a_command_imports_a_command():
    importers = {(name, target) for name, targets in project_graph().items() if room_of(name) not in COMMANDS
                 for target in targets if room_of(target) in COMMANDS}
    assert importers == set()


def test_the_framework_never_imports_a_task():
    for name, path in modules().items():
        if name.startswith("ao_calib."):
            text = path.read_text()
            assert not re.search(r"^\s*(from|import)\s+(tasks|ao_calib_tasks)\b", text, re.M), name


def test_no_import_cycles():
    graph = project_graph()
    state: dict[str, int] = {}
    cycles = []

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, [*stack, nxt])
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_every_package_folder_is_installed():
    setuptools = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    # conf/ and data/ install as ao_calib.conf and ao_calib.data: folders of files, not of modules
    shipped = {name for name, folder in setuptools["package-dir"].items() if folder in ("conf", "data")}
    assert shipped == {"ao_calib.conf", "ao_calib.data"}
    packages = {name for name, path in modules().items() if path.name == "__init__.py"}
    assert packages == set(setuptools["packages"]) - shipped


@functools.cache
def project_graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports(name, path, set(mods)) for name, path in mods.items()}


def test_calibration_imports_no_trainer():
    graph = project_graph()
    crossing = {(name, target) for name, targets in graph.items() if name.startswith("ao_calib.calibration")
                for target in targets if target.startswith("ao_calib.trainers")}
    assert crossing == set()


def test_trainers_share_a_base_instead_of_importing_each_other():
    trainers = {f"ao_calib.trainers.{name}" for name in ("grpo", "ppo", "rloo", "sft")}
    graph = project_graph()
    assert trainers <= set(graph)
    assert {(name, target) for name in trainers for target in graph[name] if target in trainers} == set()


def test_nothing_outside_the_tests_imports_them():
    for folder in ("ao_calib", "tasks", "bench", "experiments"):
        for path in (PROJECT_ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                assert not any(n == "tests" or n.startswith("tests.") for n in names), path
            assert not re.search(r"-m\s+tests\.|\"tests\.\w+\"", path.read_text()), path
    for path in [*(PROJECT_ROOT / "conf").rglob("*.yaml"), PROJECT_ROOT / "README.md"]:
        assert not re.search(r"python -m tests\.", path.read_text()), path


def test_test_modules_import_only_the_helpers_of_the_tests():
    """A test module takes what it shares with others from tests/helpers/ and its fixtures by name: it imports
    neither tests/conftest.py nor another test module."""
    crossing = []
    for path in (PROJECT_ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                module = node.module or ""
                names = [f"{module}.{alias.name}" if module == "tests" else module for alias in node.names]
            else:
                continue
            crossing += [(path.relative_to(PROJECT_ROOT).as_posix(), name) for name in names
                         if (name.startswith("tests.") and not name.startswith("tests.helpers"))
                         or re.fullmatch(r"conftest|test_\w+", name)]
    assert crossing == []
