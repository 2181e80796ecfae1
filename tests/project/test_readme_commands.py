"""Every command in the code blocks of the README and the docs pages still works as written.

Cheap commands run for real against a tiny finished run (re-evaluation, plots, the report, export); a training
command (a sweep's first job) goes through every check ``ao_calib.run`` makes before it loads a model: Hydra's
composition, the plug-in schemas and unknown keys, so a group, option or key it names that no longer exists fails; commands that need something only the user has (their completions, a server, a hub account) show their --help.
A command of a module no rule knows fails the test: add a rule for it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.helpers.commands import help_page, run_cli
from tests.helpers.paths import CONF_DIR, PROJECT_ROOT
from tests.helpers.runs import copy_run, offline_function_call_run

README = PROJECT_ROOT / "README.md"
# The docs pages whose commands are checked here: every page but the generated settings reference and the results and
# experiment pages (which quote the commands that made each figure, benchmark scripts among them).
NOT_CHECKED = ("reference/", "experiments/", "results.md")


def documented_pages() -> list[Path]:
    """README.md and the docs pages whose commands this test runs."""
    docs = PROJECT_ROOT / "docs"
    pages = [p for p in sorted(docs.rglob("*.md")) if not p.relative_to(docs).as_posix().startswith(NOT_CHECKED)]
    return [README, *pages]
COMPOSE = ["compose in process"]  # marks an ao_calib.run command checked by compose_run
EXAMPLE_RUN = re.compile(r"^outputs/(runs|multiruns)/")  # the README's placeholder run and sweep folders


def code_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of each fenced block."""
    return re.findall(r"^```(\w*)\n(.*?)^```", text, re.S | re.M)


def readme_commands(pages: list[Path] | None = None) -> list[list[str]]:
    """Each ``python -m ...`` command of the shell blocks of ``pages`` (default: README and the checked docs pages) as
    argv (environment assignments first)."""
    commands = []
    text = "\n".join(page.read_text() for page in (documented_pages() if pages is None else pages))
    for language, body in code_blocks(text):
        if language not in ("bash", "sh", ""):
            continue
        for line in body.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            command: list[str] = []
            for word in [*words, "&&"]:
                if word in ("&&", "&", ";", "||"):
                    if "python" in command and command[command.index("python") + 1:][:1] == ["-m"]:
                        commands.append(command)
                    command = []
                else:
                    command.append(word)
    return commands


def split_top_level(value: str) -> list[str]:
    """``a,b`` -> [a, b]; commas inside [] or {} stay."""
    parts, depth, current = [], 0, ""
    for char in value:
        depth += char in "[{"
        depth -= char in "]}"
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    return [*parts, current]


def first_job(args: list[str]) -> list[str]:
    """A sweep's overrides as its first job's: no ``-m``, the first value of each swept key."""
    out = []
    for arg in args:
        if arg in ("-m", "--multirun"):
            continue
        key, sep, value = arg.partition("=")
        out.append(f"{key}={split_top_level(value)[0]}" if sep and not key.startswith("hydra.") else arg)
    return out


def readme_package(root: Path) -> Path:
    """The documented own-task package (the blocks whose first line is ``# my_pkg/...``, docs/tasks.md), written under
    ``root``."""
    for language, body in code_blocks("\n".join(page.read_text() for page in documented_pages())):
        first = body.splitlines()[0] if body.strip() else ""
        if match := re.fullmatch(r"# (my_pkg/\S+)", first.strip()):
            path = root / match.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body)
    for package in {p.parent for p in root.glob("my_pkg/**/*") if p.is_file()}:
        (package / "__init__.py").touch()
    return root


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A tiny finished run the README's run-directory commands are pointed at: a copy of the one test_first_hour
    also reads (made once per test process), as ``runs/r`` of a folder of its own (the README's sweep folder)."""
    run, _, _ = offline_function_call_run(tmp_path_factory.getbasetemp() / "offline_function_call_run")
    return copy_run(run, tmp_path_factory.mktemp("readme") / "runs" / "r")


def as_tested(argv: list[str], run: Path, tmp: Path) -> tuple[list[str], dict[str, str]] | None:
    """The command to run for a README command (``None``: one that is not run), and its environment."""
    env = {}
    while argv and re.fullmatch(r"[A-Z_]+=.*", argv[0]):
        name, _, value = argv.pop(0).partition("=")
        env[name] = str(readme_package(tmp / "pkg")) if name == "PYTHONPATH" else value
    module, args = argv[2], argv[3:]

    def at_run(arg: str) -> str:  # the README's placeholder run (or sweep) folder -> the tiny run (its folder)
        key, sep, value = arg.rpartition("=")
        if not EXAMPLE_RUN.match(value) or key.startswith(("hydra.", "trainer.")):
            return arg
        target = run.parent if value.startswith("outputs/multiruns") else run
        return f"{key}{sep}{target}"

    if module == "pytest":
        return None  # the suite itself
    if module == "ao_calib.run":
        if not env and not {"--help", "--cfg"} & set(args):
            return COMPOSE, first_job(args)  # composed in this process: a subprocess each would cost seconds
        return [module, *(args if {"--help", "--cfg"} & set(args) else [*first_job(args), "--cfg", "job"])], env
    if module in ("ao_calib.eval", "ao_calib.plot", "ao_calib.report"):
        return [module, *map(at_run, args)], env
    if module == "ao_calib.export" and any(a.startswith("push_to_hub=") for a in args):
        return [module, "--help"], env  # needs the user's hub account (tests/commands/test_export.py uploads to a stand-in)
    if module == "ao_calib.export":
        return [module, *map(at_run, args), f"out={tmp / 'export'}-{len(list(tmp.glob('export*')))}"], env
    if module in ("ao_calib.score", "ao_calib_tasks.oracle.judge_server", "ao_calib_tasks.oracle.make_questions"):
        return [module, "--help"], env  # the user's completions / serves until stopped / asks an LLM
    if module.startswith("ao_calib_tasks.") and module.endswith(".generate"):  # writes its files under tmp instead
        out = args.index("--out") + 1
        return [module, *args[:out], str(tmp / "generated" / args[out]), *args[out + 1:]], env
    raise AssertionError(f"README runs `python -m {module}`: tests/project/test_readme_commands.py has no rule for it")


def test_the_readme_has_the_commands_this_test_knows():
    modules = {argv[argv.index("python") + 2] for argv in readme_commands([README])}
    assert {"ao_calib.run", "ao_calib.eval", "ao_calib.plot", "ao_calib.report", "pytest"} <= modules


def compose_run(overrides: list[str]) -> str | None:
    """What ``python -m ao_calib.run OVERRIDES`` checks before it loads anything, or None when all is well: the
    composition (groups, options, typed keys), the plug-in schemas and unknown keys."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from ao_calib.config.compose import unknown_keys, validate_plugins

    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            cfg = compose("config", overrides=overrides)
        validate_plugins(cfg)
        extra = unknown_keys(cfg)
        return f"unknown keys {extra}" if extra else None
    except Exception as exc:  # noqa: BLE001 -- every failure is reported with its command
        return f"{type(exc).__name__}: {exc}"
    finally:
        GlobalHydra.instance().clear()


@pytest.mark.slow
def test_every_readme_command_runs_or_composes(finished_run, tmp_path):
    failures = []
    # A command written the same way on several pages is one command: it is checked once.
    for argv in dict.fromkeys(map(tuple, readme_commands())):
        argv = list(argv)
        tested = as_tested(list(argv), finished_run, tmp_path)
        if tested is None:
            continue
        if tested[0] is COMPOSE:
            if (error := compose_run(tested[1])) is not None:
                failures.append(f"{shlex.join(argv)}\n  composed as: {shlex.join(tested[1])}\n  {error}")
            continue
        args, env = tested
        result = help_page(*args) if "--help" in args and not env else run_cli(*args, env=env)
        if result.returncode != 0:
            failures.append(f"{shlex.join(argv)}\n  ran as: {shlex.join(args)}\n  {result.stderr.strip()[-1500:]}")
    assert not failures, "README and docs commands that fail:\n\n" + "\n\n".join(failures)


def test_ci_runs_the_readmes_test_command_verbatim():
    test_command = next(line for _, body in code_blocks(README.read_text()) for line in body.splitlines()
                        if line.rstrip().endswith("python -m pytest"))
    assert test_command in (PROJECT_ROOT / ".ci" / "run").read_text()


def config_group_table() -> dict[str, list[str]]:
    """README's "Config groups" table: ``{group: [the options its row names]}``."""
    section = README.read_text().split("### Config groups (`conf/`)", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and re.fullmatch(r"`\w+`", cells[0]):
            rows[cells[0].strip("`")] = re.findall(r"`(\w+)`", cells[1])
    return rows


def test_readme_config_group_table_lists_every_option():
    """Each group's row names exactly the options in conf/<group>/ (the warm-up's `format` and the
    `oracle_seed_tiny` preset were once missing)."""
    table = config_group_table()
    assert {"task", "model", "trainer", "warmup", "reward", "judge", "logger", "experiment"} <= set(table)
    for group, listed in table.items():
        shipped = sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))
        assert sorted(listed) == shipped, group


def test_readme_run_folders_name_the_task_the_command_runs():
    """A command pointed at a run folder (``outputs/runs/<task>/...``: resume, init_from) runs that task, so the
    folder it names is where that run would be."""
    from ao_calib.config.compose import compose_run_config

    checked = 0
    for argv in readme_commands():
        if argv[argv.index("python") + 2] != "ao_calib.run":
            continue
        folders = [re.match(r"outputs/runs/(\w+)/", arg.partition("=")[2]) for arg in argv
                   if arg.startswith(("hydra.run.dir=", "trainer.init_from="))]
        folders = [m.group(1) for m in folders if m]
        if not folders:
            continue
        args = first_job(argv[argv.index("python") + 3:])
        cfg = compose_run_config([a for a in args if not a.startswith(("hydra.", "trainer.init_from"))])
        expected = {"hydra.run.dir": cfg.task.name, "trainer.init_from": None}
        for arg in argv:
            key, _, value = arg.partition("=")
            if key == "hydra.run.dir" and (m := re.match(r"outputs/runs/(\w+)/", value)):
                assert m.group(1) == expected[key], shlex.join(argv)
                checked += 1
            if key == "trainer.init_from" and (m := re.match(r"outputs/runs/(\w+)/", value)):
                assert m.group(1) == cfg.task.name, shlex.join(argv)  # PPO from an SFT run of the same task
                checked += 1
    assert checked >= 2


def test_quickstart_time_in_help_matches_the_readme():
    readme = re.search(r"It takes about (\d+) minutes on 2 CPU cores", README.read_text())
    help_template = (CONF_DIR / "hydra" / "default.yaml").read_text()
    in_help = re.search(r"experiment=quickstart\s+# the offline demo, about (\d+) minutes on 2 CPU cores",
                        help_template)
    assert readme and in_help and readme.group(1) == in_help.group(1)
