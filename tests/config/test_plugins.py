"""A task and a judge from a package outside this repository plug in by config alone (``_target_`` and
``hydra.searchpath``) and run end to end through ``python -m ao_calib.run``, with no edit to ao_calib."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.helpers.commands import run_cli

FILES = {
    "my_pkg/__init__.py": "",
    "my_pkg/conf/__init__.py": "",
    "my_pkg/task.py": '''
        from dataclasses import dataclass

        import datasets

        from ao_calib.task_api import TaskConfig
        from ao_calib.rewards import completion_text
        from ao_calib.task_api import Task, TaskData


        @dataclass
        class GreetConfig(TaskConfig):
            n_rows: int = 16
            word: str = "hello"


        class GreetTask(Task):
            """Rewards completions that contain the configured word."""

            config_class = GreetConfig
            headline_metric = "says_word"

            def build_data(self, tokenizer, model):
                rows = [{"prompt": [{"role": "user", "content": f"Say {self.config.word}, number {i}."}]}
                        for i in range(self.config.n_rows)]
                data = datasets.Dataset.from_list(rows)
                return TaskData(train=data, test=data.select(range(4)))

            def reward_functions(self, data):
                word = self.config.word

                def says_word(completions, **_):
                    return [float(word in completion_text(c)) for c in completions]

                return {"says_word": says_word}

            def score(self, completions, rows, data):
                return [{"says_word": float(self.config.word in c)} for c in completions]
    ''',
    "my_pkg/judge.py": '''
        from dataclasses import dataclass

        from ao_calib.core.plugins import PluginConfig
        from ao_calib.judges import Judge


        @dataclass
        class WordCountJudgeConfig(PluginConfig):
            min_words: int = 1


        class WordCountJudge(Judge):
            """Informative means at least ``min_words`` words, whatever they say."""

            config_class = WordCountJudgeConfig

            def __init__(self, min_words):
                super().__init__()
                self.min_words = min_words

            @classmethod
            def from_config(cls, cfg, context):
                return cls(cfg.min_words)

            async def score(self, items):
                self.stats.calls += len(items)
                return [1.0 if len(item.answer.split()) >= self.min_words else 0.0 for item in items]
    ''',
    "my_pkg/old_task.py": '''
        from my_pkg.task import GreetTask


        class OldGreetTask(GreetTask):
            """Written for the API before the run's data was passed to the steps."""

            def reward_functions(self):
                return super().reward_functions(None)

            def score(self, completions, rows):
                return super().score(completions, rows, None)
    ''',
    "my_pkg/conf/task/old_greet.yaml": '''
        _target_: my_pkg.old_task.OldGreetTask
        name: old_greet
    ''',
    "my_pkg/conf/task/greet.yaml": '''
        _target_: my_pkg.task.GreetTask
        name: greet
        word: hi
    ''',
    "my_pkg/conf/reward/greet.yaml": '''
        defaults:
          - reward_schema
        name: greet
        weights:
          says_word: 1.0
    ''',
    "my_pkg/conf/judge/word_count.yaml": '''
        _target_: my_pkg.judge.WordCountJudge
        name: word_count
        min_words: 2
    ''',
}


@pytest.fixture(scope="module")
def package(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("outside_repo")
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


def run(package: Path, *overrides: str):
    return run_cli("ao_calib.run", "hydra.searchpath=[pkg://my_pkg.conf]", *overrides,
                   env={"PYTHONPATH": str(package)})


@pytest.mark.slow
def test_a_task_from_another_package_trains_and_evaluates(package, tmp_path):
    out = tmp_path / "run"
    result = run(package, "task=greet", "model=tiny_qwen3", "trainer.max_steps=1", "trainer.batch_size=2",
                 "trainer.num_generations=2", "trainer.max_completion_length=4", "trainer.save_steps=100",
                 "eval.num_samples=2", "eval.max_new_tokens=4", "eval.initial=false", f"hydra.run.dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed"
    assert json.loads((out / "eval.json").read_text())["task"] == "greet"
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("rewards/says_word/mean" in row for row in rows)
    config = (out / "config.yaml").read_text()
    assert "n_rows: 16" in config and "word: hi" in config  # the schema's default and the YAML's setting


def test_a_misspelt_key_of_an_outside_task_is_named(package, tmp_path):
    result = run(package, "task=greet", "model=tiny_qwen3", "+task.n_rowz=3", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 2 and "task.n_rowz" in result.stderr and "Traceback" not in result.stderr


def test_a_task_written_for_the_old_step_signatures_is_refused_naming_each_step(package, tmp_path):
    result = run(package, "task=old_greet", "reward=greet", "model=tiny_qwen3", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert "my_pkg.old_task.OldGreetTask: reward_functions, score must take the run's data" in result.stderr
    assert not (tmp_path / 'x').exists()  # refused before the run starts


@pytest.mark.slow
def test_a_judge_from_another_package_scores_the_oracle(package, tmp_path):
    out = tmp_path / "run"
    # GRPO alone (no warm-up, no evaluation): the stage the judge scores
    result = run(package, "experiment=oracle_tiny", "judge=word_count", "warmup.enabled=false", "trainer.max_steps=1",
                 "trainer.num_generations=2", "eval.enabled=false", f"hydra.run.dir={out}")
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["judge"]["judge/calls"] > 0


def installed_plugin(root: Path, register_body: str) -> Path:
    """A plug-in package on ``root`` that registers its config schemas through the ``ao_calib.config_schemas``
    entry point, as an installed distribution (a ``.dist-info`` folder importlib.metadata finds on the path)."""
    root.mkdir(parents=True)
    (root / "schemas_plugin.py").write_text(f"def register():\n    {register_body}\n")
    info = root / "schemas_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: schemas-plugin\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[ao_calib.config_schemas]\nschemas_plugin = schemas_plugin:register\n")
    return root


def test_a_broken_plugin_stops_the_run_with_its_own_error(tmp_path):
    """No import-time loop that downgrades a failure to a warning: the run stops at once, exit 2, with the
    plug-in's own error and its name, before Hydra composes anything."""
    root = installed_plugin(tmp_path / "site", "raise RuntimeError('the plug-in cannot find its schema file')")
    result = run_cli("ao_calib.run", "experiment=function_call_tiny", f"hydra.run.dir={tmp_path / 'never'}",
                     env={"PYTHONPATH": str(root)}, timeout=120)
    assert result.returncode == 2, result.stderr[-2000:]
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("error: plug-in schemas_plugin = schemas_plugin:register (package schemas-plugin")
    assert "RuntimeError: the plug-in cannot find its schema file" in last
    assert "Traceback" not in result.stderr and not (tmp_path / "never").exists()


def test_plugin_schemas_are_registered_when_asked_not_at_import(tmp_path, monkeypatch):
    """Importing ao_calib registers nothing; ``register_plugin_schemas`` runs each plug-in's registration once
    asked, and a failing one raises ``PluginError`` naming it."""
    import importlib.metadata
    import sys

    from ao_calib.core.plugins import PluginError, register_plugin_schemas

    root = installed_plugin(tmp_path / "ok", "import builtins; builtins._schemas_plugin_calls = "
                                             "getattr(builtins, '_schemas_plugin_calls', 0) + 1")
    monkeypatch.syspath_prepend(str(root))
    importlib.invalidate_caches()
    import builtins

    assert "schemas_plugin" in register_plugin_schemas() and builtins._schemas_plugin_calls == 1
    del builtins._schemas_plugin_calls
    sys.modules.pop("schemas_plugin", None)
    (root / "schemas_plugin.py").write_text("def register():\n    raise KeyError('schema')\n")
    with pytest.raises(PluginError, match=r"schemas_plugin.*KeyError: 'schema'"):
        register_plugin_schemas()
    sys.modules.pop("schemas_plugin", None)
    assert importlib.metadata.version("schemas-plugin") == "1.0"
