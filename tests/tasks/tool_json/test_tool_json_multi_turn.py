"""``task.episode=multi_turn`` of the JSON tool task: its rows carry the whole trajectory an SFT warm-up imitates and
the multi-turn system prompt, its data gives GRPO the calculator and Python tools, the tokenizer parses the model's
calls, the episode reward is offered, settings that cannot run tools are refused before any model loads, and a row
whose expected call does not return its answer is named."""

from __future__ import annotations

import json

import pytest

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.task_api import TRAJECTORY, build_task
from tests.helpers.commands import run_cli

MULTI = ["task=tool_json", "model=tiny_qwen3", "task.episode=multi_turn", "trainer=grpo",
         "reward=tool_json_episode", "task.data.generate.n=30"]


def test_multi_turn_rows_tools_and_parser(tmp_path):
    cfg = compose_run_config([*MULTI, f"paths.cache_dir={tmp_path}"])
    task = build_task(cfg)
    settings = typed(cfg.model, ModelConfig)
    tokenizer = models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)
    data = task.build_data(tokenizer)
    assert [tool.__name__ for tool in data.tools.functions] == ["calculator", "python"]
    assert data.tools.max_rounds == 3
    row = data.train[0]
    assert "the tool's result comes back in the next message" in row["prompt"][0]["content"]
    episode = json.loads(row[TRAJECTORY])
    assert json.loads(episode[-1]["content"]) == {"final": row["expected_answer"]}
    assert tokenizer.response_template is not None
    assert set(task.reward_functions(data)) >= {"episode_reward"}
    assert task.reward_functions(data)["episode_reward"]([episode], **{k: [row[k]] for k in
                                                                   ("tool", "tool_args", "expected_answer")}) \
        == [1.2 if row["tool"] else 1.0]


def test_single_turn_rows_are_as_before(tmp_path):
    cfg = compose_run_config(["task=tool_json", "model=tiny_qwen3", "task.data.generate.n=30",
                              f"paths.cache_dir={tmp_path}"])
    data = build_task(cfg).build_data(None)
    assert not data.tools and TRAJECTORY not in data.train.column_names


@pytest.mark.parametrize(("overrides", "named"), [
    (["trainer=ppo", "reward=tool_json"], "trainer=ppo (single-turn completions; use trainer=grpo)"),
    (["trainer.shared_prefix=true"], "trainer.shared_prefix=true"),
])
def test_settings_that_cannot_run_tools_are_refused_before_the_model_loads(tmp_path, overrides, named):
    result = run_cli("ao_calib.run", *MULTI, *overrides, f"paths.output_dir={tmp_path}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "runs tools inside its episodes" in result.stderr and named in result.stderr.splitlines()[-1]
    assert "Loading weights" not in result.stdout + result.stderr


def test_a_row_whose_call_does_not_return_its_answer_is_named(tmp_path, caplog):
    rows = [{"id": "ok", "source": "test", "category": "calculator", "tool_needed": True, "tool": "calculator",
             "tool_args": {"expression": "2 + 3"}, "prompt": "2+3?", "expected_answer": "5"},
            {"id": "off", "source": "test", "category": "calculator", "tool_needed": True, "tool": "calculator",
             "tool_args": {"expression": "2 + 3"}, "prompt": "2+4?", "expected_answer": "6"}]
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(rows))
    cfg = compose_run_config([*MULTI, f"task.data.train_path={path}", f"task.data.test_path={path}"])
    settings = typed(cfg.model, ModelConfig)
    tokenizer = models.load_tokenizer(models.model_source(settings, compose_run_config([]).paths.cache_dir), settings)
    with caplog.at_level("WARNING"):
        build_task(cfg).build_data(tokenizer)
    assert "1 of 2 rows' expected call does not return their expected_answer" in caplog.text and "off" in caplog.text
