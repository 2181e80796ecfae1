"""BFCL multi-turn as the function-call task evaluates it: a held-out path of multi-turn question files becomes rows
whose episodes run on their case's API instances (``TaskData.row_tools``), the later user turns fed one at a time, and
each episode is scored by BFCL's checker with its failure type. A scripted model that writes the ground truth passes
every case; one that stops answering after the first turn fails each case that needs more, as BFCL says."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("bfcl_eval", reason="pip install --no-deps bfcl-eval==2026.3.23")

from ao_calib_tasks.function_call.bfcl_multi_turn import (
    FORMAT_CREDIT,
    Environment,
    call_string,
    load_cases,
    turn_reward,
)
from ao_calib_tasks.function_call.parsing import parse_calls

from ao_calib.config.compose import compose_run_config, typed
from ao_calib.models import loading as models
from ao_calib.models.config import ModelConfig
from ao_calib.task_api import build_task
from ao_calib.tools.episodes import LATER_TURNS, play
from tests.helpers.bfcl_rows import write_multi_turn_folder
from tests.helpers.scripted_rollouts import Script, completion_rows, run_one_step, stage

CASES = 4  # of each category written


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two of BFCL's multi-turn category files, cut to their first cases, laid out as bfcl_eval/data."""
    root = tmp_path_factory.mktemp("bfcl_multi_turn")
    write_multi_turn_folder(root, {c: load_cases(c)[:CASES] for c in ("multi_turn_base", "multi_turn_miss_func")})
    return root


@pytest.fixture(scope="module")
def task_data(folder):
    cfg = compose_run_config(["experiment=function_call_tiny", "task.data.format=bfcl",
                              "task.data.generate.n_train=4", f"task.data.test_path={folder}"])
    task = build_task(cfg)
    settings = typed(cfg.model, ModelConfig)
    tokenizer = models.load_tokenizer(models.model_source(settings, cfg.paths.cache_dir), settings)
    return task, task.build_data(tokenizer), tokenizer


def scripted(stop_after_first_turn: bool = False):
    """A model that answers each user turn with the turn's ground-truth calls (keyword arguments, as BFCL's
    decoder keeps them) in one message, then a message without a call."""

    def generate_turn(asked: list[dict]) -> list[str]:
        texts = []
        for row in asked:
            case = json.loads(row["bfcl_case"])
            turn = sum(m["role"] == "user" for m in row["prompt"]) - 1
            answered = row["prompt"][-1]["role"] != "user"  # the turn's calls ran: end the turn
            calls = [call_string(Environment(case).named(c)) for text in case["ground_truth"][turn]
                     for c in parse_calls(text)]
            silent = answered or not calls or (stop_after_first_turn and turn > 0)
            texts.append("All done." if silent else "[" + ", ".join(calls) + "]")
        return texts

    return generate_turn


def test_a_multi_turn_folder_becomes_episode_rows_with_their_own_tools(task_data):
    task, data, _ = task_data
    assert len(data.train) == 4 and len(data.test) == 2 * CASES and data.tools is None
    row = data.test[0]
    assert row["kind"] == "multi_turn_base" and row["prompt"][0]["role"] == "system"
    assert len(row["later_turns"]) == len(json.loads(row["bfcl_ground_truth"])) - 1
    tools = data.row_tools(row)
    assert "cd" in tools.by_name() and tools.max_rounds == 20
    assert not set(data.train["id"]) & set(data.test["id"])  # BFCL's cases are never training rows


def test_the_ground_truth_passes_every_case_and_stopping_early_fails_as_bfcl_says(task_data):
    task, data, tokenizer = task_data
    rows = data.test.to_list()
    episodes = play(scripted(), rows, data.row_tools, tokenizer, {})
    scores = task.score(episodes, rows, data)
    assert [s["bfcl_ast"] for s in scores] == [1.0] * len(rows)
    assert all(s["turns_passed"] == 1.0 and s["calls"] > 0 for s in scores)
    early = task.score(play(scripted(stop_after_first_turn=True), rows, data.row_tools, tokenizer, {}), rows, data)
    assert all(s["bfcl_ast"] == 0.0 and s["fail_empty_turn_model_response"] == 1.0 for s in early)
    for s, r in zip(early, rows):  # the first turn after the first that needs a call is the one that fails
        truth = json.loads(r["bfcl_ground_truth"])
        failing = next(i for i, calls in enumerate(truth) if i > 0 and calls)
        assert s["turns_passed"] == pytest.approx(failing / len(truth))
    records = [{"kind": r["kind"], "scores": s, "completion": "", "episode": []} for r, s in zip(rows, early)]
    metrics = task.aggregate(records, None, "test")
    assert metrics["ast_accuracy/multi_turn_base"] == 0.0 and metrics["fail_empty_turn_model_response"] == 1.0
    assert "empty_where_call_needed" not in metrics


def test_the_per_turn_reward_is_the_share_of_turns_passed_with_a_little_format_credit(task_data):
    task, data, tokenizer = task_data
    rows = data.test.to_list()
    cases = [r["bfcl_case"] for r in rows]
    right = turn_reward(play(scripted(), rows, data.row_tools, tokenizer, {}), bfcl_case=cases)
    assert right == pytest.approx([1.0 + FORMAT_CREDIT] * len(rows))
    early = turn_reward(play(scripted(stop_after_first_turn=True), rows, data.row_tools, tokenizer, {}),
                        bfcl_case=cases)
    for reward, row in zip(early, rows):
        truth = json.loads(row["bfcl_ground_truth"])
        needed = [i for i, calls in enumerate(truth) if calls]
        failing = next(i for i in needed if i > 0)
        assert reward == pytest.approx(failing / len(truth) + FORMAT_CREDIT * (needed[0] == 0) / len(needed))
    assert turn_reward([[{"role": "assistant", "content": "no idea"}]], bfcl_case=cases[:1]) == [0.0]


def test_generated_multi_turn_cases_train_on_whole_episodes_and_are_scored_per_turn(tmp_path):
    """task.data.format=multi_turn: SFT rows hold the ground-truth episode (the model's turns alone in the loss, the
    tools' results and the later user turns out of it); held-out rows play over their case's instances, and the
    ground truth passes BFCL's checker."""
    from ao_calib.tools import TRAJECTORY
    from ao_calib.trainers.sft import tokenize_pairs

    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "trainer=sft", "task.data.format=multi_turn",
                              "task.data.generate.n_train=6", "task.data.generate.n_test=3"])
    task = build_task(cfg)
    settings = typed(cfg.model, ModelConfig)
    tokenizer = models.load_tokenizer(models.model_source(settings, cfg.paths.cache_dir), settings)
    data = task.build_data(tokenizer)
    assert (len(data.train), len(data.test)) == (6, 3) and task.headline_metric == "bfcl_ast"
    assert not set(data.train["id"]) & set(data.test["id"])
    row = data.train[0]
    episode = json.loads(row[TRAJECTORY])
    users = [m for m in episode if m["role"] == "user"]
    assert len(users) == len(json.loads(row["bfcl_ground_truth"])) - 1
    encoded = tokenize_pairs(data.train.select([0]), tokenizer, {}, 32768)[0]
    text = [tokenizer.decode([t]) for t in encoded["input_ids"]]
    trained = "".join(t for t, m in zip(text, encoded["completion_mask"]) if m)
    assert episode[0]["content"] in trained and "Done." in trained
    assert all(m["content"] not in trained for m in episode if m["role"] in ("tool", "user") and len(m["content"]) > 8)
    rows = data.test.to_list()
    scores = task.score(play(scripted(), rows, data.row_tools, tokenizer, {}), rows, data)
    assert [s["bfcl_ast"] for s in scores] == [1.0] * 3


def test_bad_calls_come_back_as_error_text_and_are_counted(task_data):
    """An unknown function, a wrong argument, a method that raises and a malformed call: each is an error result
    the model reads (or, malformed, a turn that ends), counted in the episode's scores; nothing stops the run."""
    task, data, tokenizer = task_data
    row = next(r for r in data.test.to_list() if "GorillaFileSystem" in json.loads(r["bfcl_case"])["involved_classes"])
    bad = iter(["[no_such_function(x=1), cd(wrong_kw='a')]", "[cat(file_name='missing_file.txt')]",
                "[cd(folder=)", "Nothing more."])

    def generate_turn(asked):
        return [next(bad, "Nothing more.") for _ in asked]

    [episode] = play(generate_turn, [row], data.row_tools, tokenizer, {})
    results = [m["content"] for m in episode if m["role"] == "tool"]
    assert results[0] == "{'error': 'Tool no_such_function not found.'}"
    assert results[1].startswith("Error during execution: GorillaFileSystem.cd() got an unexpected keyword")
    assert "missing_file.txt" in results[2]  # the class's own error text, as BFCL returns it
    [scores] = task.score([episode], [row], data)
    assert scores["tool_errors"] == 2 and scores["malformed_calls"] == 1 and scores["bfcl_ast"] == 0.0


def test_generated_multi_turn_runs_score_bfcl_multi_turn_cases_as_their_extra_held_out_set(folder):
    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=multi_turn",
                              f"task.data.extra_test_path={folder}", "task.data.extra_test_samples=3",
                              "task.data.bfcl_docs=signatures", "task.max_steps_per_turn=3",
                              "task.data.generate.n_train=2", "task.data.generate.n_test=1"])
    task = build_task(cfg)
    rows = task.extra_rows()
    assert task.build_data(None).row_tools(rows[0]).max_rounds == 3  # the bound on a turn's call messages
    assert len(rows) == 3 and all(r["kind"] in ("multi_turn_base", "multi_turn_miss_func") for r in rows)
    assert all("one a line:" in r["prompt"][0]["content"] and LATER_TURNS in r for r in rows)


class GroundTruthScript(Script):
    """A sampled model that writes each user turn's ground-truth calls, then a message without a call (the case is
    found by its first user turn in the prompt's text)."""

    def __init__(self, tokenizer, rows: list[dict]):
        super().__init__(tokenizer)
        self.cases = {r["prompt"][1]["content"]: json.loads(r["bfcl_case"]) for r in rows}

    def reply(self, prompt_text: str) -> str:
        case = next(c for first, c in self.cases.items() if first in prompt_text)
        turn = prompt_text.count("<|im_start|>user") - 1
        calls = [call_string(Environment(case).named(c)) for text in case["ground_truth"][turn]
                 for c in parse_calls(text)]
        answered = prompt_text.rsplit("<|im_start|>", 2)[-2].startswith("tool")
        return ("Done." if answered or not calls else "[" + ", ".join(calls) + "]") + "<|im_end|>"


def test_generated_multi_turn_cases_train_with_grpo_on_whole_episodes(tmp_path):
    """GRPO on generated multi-turn cases: each rollout plays its case over its own instances through every user
    turn (``ao_calib.tools.rollouts``) and earns the per-turn reward of the episode it played."""
    from ao_calib.rewards import RewardPhase, RewardSchedule
    from ao_calib.runs.run_dir import RunDir
    from ao_calib.trainers import TrainerSetup

    cfg = compose_run_config(["task=function_call", "model=tiny_qwen3", "trainer=grpo", "task.data.format=multi_turn",
                              "task.data.generate.n_train=2", "task.data.generate.n_test=1",
                              "task.data.bfcl_docs=signatures"])
    task, settings = build_task(cfg), typed(cfg.model, ModelConfig)
    source = models.model_source(settings, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source, settings)
    data = task.build_data(tokenizer)
    rewards: list[float] = []

    def recorded(completions, **kwargs):
        rewards.extend(turn_reward(completions, **kwargs))
        return rewards[-len(completions):]

    model = models.attach_lora(models.load_base_model(settings, source), settings)
    setup = TrainerSetup(settings, model, tokenizer, data, RunDir(tmp_path),
                         RewardSchedule(("turn_reward",), (RewardPhase(None, (1.0,)),)), {"turn_reward": recorded})
    seen = run_one_step(setup, GroundTruthScript(tokenizer, data.train.to_list()),
                        stage(max_completion_length=2048))
    assert rewards == pytest.approx([1.0 + FORMAT_CREDIT] * 4)  # every turn of every episode passes BFCL's checks
    assert all(0 in mask and 1 in mask for _, mask in completion_rows(seen))


def test_multi_turn_cases_refuse_a_trainer_without_episodes_before_the_model_loads(tmp_path):
    from tests.helpers.commands import run_cli

    result = run_cli("ao_calib.run", "task=function_call", "model=tiny_qwen3", "trainer=rloo",
                     "task.data.format=multi_turn", f"paths.output_dir={tmp_path}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert "trainer=rloo (single-turn completions; use trainer=grpo)" in result.stderr.splitlines()[-1]
    assert "Loading weights" not in result.stdout + result.stderr


def test_a_single_turn_extra_set_on_a_multi_turn_run_is_refused_naming_its_key(tmp_path):
    """A multi-turn run plays its extra held-out set as episodes: a folder of single-turn BFCL files would give it no
    rows at all, so it is refused before anything loads rather than scored as nothing."""
    from ao_calib.core.errors import AOCalibError

    single = tmp_path / "bfcl"
    single.mkdir()
    (single / "BFCL_v4_simple_python.json").write_text("")
    with pytest.raises(AOCalibError, match=r"task.data.extra_test_path=.* holds no BFCL multi-turn question file"):
        compose_run_config(["task=function_call", "model=tiny_qwen3", "task.data.format=multi_turn",
                            f"task.data.extra_test_path={single}"])
