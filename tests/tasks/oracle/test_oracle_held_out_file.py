"""`python -m ao_calib.eval run_dir=RUN task.data.test_path=FILE`: a saved oracle scores any labelled yes/no file with
the run's own activation settings, training mean (centring) and control pairing."""

from __future__ import annotations

import json

import pytest
import torch

from ao_calib import eval as eval_command
from ao_calib.config.compose import load_run_config
from ao_calib.models import loading as models
from ao_calib.task_api import build_task
from ao_calib_tasks.oracle.steering import ActivationSteering
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    """A tiny real run that centres its activations on the training mean (no evaluation of its own)."""
    out = tmp_path_factory.mktemp("held_out_file") / "run"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "task.activations.center=true",
                      "warmup.max_steps=1", "trainer.max_steps=1", "eval.enabled=false", f"hydra.run.dir={out}"))
    return out


def record_injections(monkeypatch) -> dict:
    """(target prompt, question, condition) -> the vectors the steering batch injects for that row."""
    injected: dict[tuple[str, str, str], torch.Tensor] = {}
    batch_for = ActivationSteering.batch_for

    def recording(self, rows, input_ids, condition="own"):
        batch = batch_for(self, rows, input_ids, condition)
        for row, vectors, positions in zip(rows, batch.vectors, batch.positions):
            injected[(row["source_prompt"], row["question"], condition)] = vectors[positions >= 0].clone()
        return batch

    monkeypatch.setattr(ActivationSteering, "batch_for", recording)
    return injected


def write_jsonl(path, rows: list[dict]):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_labelled_file_is_scored_with_the_runs_own_vectors_centre_and_control_pairs(saved_run, tmp_path,
                                                                                     monkeypatch):
    cfg = load_run_config(saved_run / "config.yaml")
    assert cfg.task.activations.center and not cfg.task.data.test_path
    source = build_task(cfg).source_rows()  # the run's own splits (generated from its seed)
    train, own = source.train, source.test
    # the file: the run's held-out rows in another order, and new questions about two of their prompts
    new = [{"prompt": own[i]["prompt"], "question": f"Is this text number {i} of the file?", "answer": answer}
           for i, answer in ((0, "Yes"), (3, "No"))]
    rows = [{"prompt": r["prompt"], "question": r["question"], "answer": r["answer"]} for r in reversed(own)] + new
    same_prompts = write_jsonl(tmp_path / "held_out.jsonl", rows)
    # and a file that also asks about a prompt of neither split: the training mean stays the training rows'
    other_prompt = {"prompt": "A text that neither split holds, about the sea.", "question": "Is it?", "answer": "No"}
    more_prompts = write_jsonl(tmp_path / "more.jsonl", rows + [other_prompt])
    assert other_prompt["prompt"] not in {r["prompt"] for r in train + own}

    injected = record_injections(monkeypatch)
    evaluations = {}
    for tag, options in (("own", [f"num_samples={len(own)}"]), ("file", [f"task.data.test_path={same_prompts}"]),
                         ("more", [f"task.data.test_path={more_prompts}", "task.eval_control=false",
                                   "task.eval_none=false"])):
        # short answers: what is checked is the vectors injected into the prompt, not what the oracle says
        assert eval_command.main([f"run_dir={saved_run}", f"tag={tag}", "max_new_tokens=2", *options]) == 0
        evaluations[tag] = dict(injected)
        injected.clear()

    scored = read_jsonl(saved_run / "eval_predictions_file.jsonl")
    assert len(scored) == len(rows) and {r["question"] for r in new} <= {r["question"] for r in scored}
    assert len(read_jsonl(saved_run / "eval_predictions_file_control.jsonl")) == len(rows)
    assert len(read_jsonl(saved_run / "eval_predictions_more.jsonl")) == len(rows) + 1
    for tag, conditions in (("file", ("own", "other", "none")), ("more", ("own",))):
        for condition in conditions:  # the prompt's vectors, the control prompt's, random ones of their norms
            for key in [(r["prompt"], r["question"], condition) for r in own]:
                assert torch.equal(evaluations["own"][key], evaluations[tag][key]), (tag, key)


def test_a_bad_held_out_file_is_refused_by_row_and_field_before_the_model_loads(saved_run, tmp_path, monkeypatch,
                                                                              capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "Hi", "question": "Is it?", "answer": "Yes"}) + "\n"
                   + json.dumps({"prompt": "Hi", "question": "Is it?", "answer": "perhaps"}) + "\n")

    def no_model(*args, **kwargs):
        raise AssertionError("the model loaded before the file was checked")

    monkeypatch.setattr(models, "load_trained_model", no_model)
    assert eval_command.main([f"run_dir={saved_run}", f"task.data.test_path={bad}", "tag=bad"]) == 2
    assert "row 1, field 'answer'" in capsys.readouterr().err
    missing = tmp_path / "missing.jsonl"
    assert eval_command.main([f"run_dir={saved_run}", f"task.data.test_path={missing}", "tag=bad"]) == 2
    err = capsys.readouterr().err
    assert "task.data.test_path" in err and str(missing) in err
