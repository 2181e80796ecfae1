"""The oracle pipeline from the command line: SFT warm-up with injection -> GRPO with the label judge -> eval."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
from omegaconf import OmegaConf

from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.files import read_jsonl


def test_a_validation_run_writes_the_raw_answer_probability_beside_the_number(tmp_path):
    """A run choosing settings on the validation split has no Platt baseline (its map is fitted on validation): it
    writes the oracle's own answer probability raw in every own-condition row, and its AUROC in eval.json is the one
    the rows give, so the bar over the Platt baseline (whose map keeps the order) can be checked from the rows."""
    from ao_calib.calibration.metrics import auroc

    out = tmp_path / "validation"
    # one warm-up step and the own condition alone: what is checked here needs no more
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", "task.data.generate.n_validation_prompts=8",
                     "task.data.eval_split=validation", "eval.initial=false", "trainer.max_steps=1",
                     "warmup.max_steps=1", "task.eval_control=false", "task.eval_none=false",
                     f"hydra.run.dir={out}")
    assert_ok(result)
    final = json.loads((out / "eval.json").read_text())
    assert "logprob_platt" not in final.get("baselines", {})
    own = read_jsonl(out / "eval_predictions.jsonl")
    probabilities = [r["baselines"]["logprob"] for r in own]
    assert len(own) == 8 and all(0 < p <= 1 for p in probabilities)
    value = auroc(probabilities, [r["scores"]["correct"] for r in own])
    reported = final["baselines"]["logprob"]["auroc"]
    assert reported == value or (math.isnan(value) and reported is None)  # null where every answer is right/wrong
    assert all("baselines" not in r for r in read_jsonl(out / "eval_predictions_warmup.jsonl"))
    assert "own-answer probability (raw" in result.stdout


def test_oracle_pipeline_run_directory(tmp_path):
    out = tmp_path / "oracle"
    fixtures = Path(__file__).parents[2] / "fixtures" / "ao_classification"
    # through the ao-calib script's entry point; the warm-up cut to 2 of the preset's 4 steps, under the raised
    # alerts.short_run_fraction (the default's tenth of 4 steps cannot be cut to)
    result = run_cli("ao_calib.cli", "run", "experiment=oracle_tiny", "task.classification.enabled=true",
                     f"task.classification.data_dir={fixtures}", "task.classification.n_per_dataset=6",
                     "task.classification.datasets=[geometry_of_truth,tense,sst2]",
                     "task.data.generate.n_validation_prompts=10", "warmup.max_steps=2", "eval.closing_table=full",
                     "alerts.short_run_fraction=0.6", f"hydra.run.dir={out}")
    assert_ok(result)
    # The closing block: the alert of a run too short to learn, the table of every evaluation (eval.closing_table=full:
    # per-example calibration columns included), then the files, named as the script names its commands.
    closing = result.stdout[result.stdout.rindex("=" * 72, 0, result.stdout.rindex("=" * 72)):]
    short = next(line for line in closing.splitlines() if "ALERT too_short_to_learn (at start-up)" in line)
    assert "warmup.max_steps=2 of the preset's 4" in short and "trainer.max_steps" not in short
    assert short.endswith("drop warmup.max_steps=2")
    header = next(line for line in closing.splitlines() if line.strip().startswith("evaluation"))
    for column in ("acc", "control", "AUROC", "ECE", "Brier", "rel", "res", "conf std", "sel@50%"):
        assert column in header.split() or column in header, column
    assert [line.split()[0] for line in closing.splitlines()[closing.splitlines().index(header) + 1:][:3]] == [
        "initial", "warmup", "final"]
    assert closing.index("evaluation") < closing.index("run directory:")
    assert f" curves: ao-calib plot {out}" in closing.splitlines()
    # Every JSON file the run wrote is strict JSON: a figure that cannot be computed is null, never NaN
    for path in out.glob("*.json"):
        json.loads(path.read_text(), parse_constant=lambda c: 1 / 0)
    classification = json.loads((out / "eval.json").read_text())["classification"]
    assert set(classification) == {"geometry_of_truth", "tense", "overall"}  # sst2 needs the hub: skipped
    assert classification["overall"]["n"] == 12 and 0 <= classification["overall"]["ece"] <= 1
    assert "sst2" in json.loads((out / "eval.json").read_text())["classification_skipped"]
    assert all("control_accuracy" in classification[name] for name in ("geometry_of_truth", "tense"))
    # The suite ran in three evaluations of this run (initial, warm-up, final): the same control pairs each time.
    pairs = [{(r["dataset"], r["activation_id"], r["control_activation_id"]) for r in read_jsonl(out / name)}
             for name in ("eval_predictions_initial_classification.jsonl", "eval_predictions_classification.jsonl")]
    assert pairs[0] == pairs[1] and len(pairs[0]) == 12 and all(a != c for _, a, c in pairs[0])
    rows = read_jsonl(out / "metrics.jsonl")
    assert {r["stage"] for r in rows} == {"warmup", "train"}
    grpo = [r for r in rows if r["stage"] == "train" and "reward" in r]
    assert len(grpo) == 2
    for key in ("rewards/calibration/mean", "calibration/brier", "calibration/informativeness",
                "calibration/confidence_mean", "calibration/confidence_std", "advantage_std",
                "calibration/answer_length", "calibration/parse_failure_rate", "calibration/resolution",
                "calibration/ece", "kl"):
        assert key in grpo[-1], key
    for tag in ("warmup", "final"):
        report = json.loads((out / ("eval.json" if tag == "final" else f"eval_{tag}.json")).read_text())
        assert {"accuracy", "auroc", "ece", "ece_equal_mass", "mce", "brier", "brier_binned", "reliability",
                "resolution", "uncertainty", "confidence_std", "aurc", "selective_accuracy@50",
                "selective_accuracy@80", "parse_rate"} <= report["metrics"].keys()
        m = report["metrics"]
        assert abs(m["reliability"] - m["resolution"] + m["uncertainty"] - m["brier_binned"]) < 1e-9
        assert sum(report["confidence_histogram"]["counts"]) == report["num_samples"]
        assert "control" in report["variants"]
        for plot in (f"reliability_{tag}.png", f"risk_coverage_{tag}.png"):
            assert (out / plot).read_bytes()[:4] == b"\x89PNG"
    # Three conditions, each its own predictions file, rows anyone can recompute a figure from.
    final = json.loads((out / "eval.json").read_text())
    assert set(final["variants"]) == {"control", "none"}
    by_condition = {c: read_jsonl(out / f"eval_predictions{suffix}.jsonl")
                    for c, suffix in (("own", ""), ("other", "_control"), ("none", "_none"))}
    for condition, records in by_condition.items():
        assert len(records) == 8 and all(r["condition"] == condition for r in records)
        assert all({"question", "kind", "source_id", "readable"} <= r.keys() for r in records)
    assert [r["question"] for r in by_condition["own"]] == [r["question"] for r in by_condition["none"]]
    # The Platt-scaled own-answer probability (fitted on as many of the 10 validation prompts' 20 rows as the
    # evaluation scored: eval.num_samples=8) is in every own row, and its figures in eval.json are the ones the rows
    # give.
    from ao_calib.calibration.metrics import auroc

    platt = final.get("baselines", {}).get("logprob_platt")
    if platt is not None:  # skipped (with a warning) when every validation answer is right, or every one wrong
        own = by_condition["own"]
        assert platt["validation_rows"] == 8 and all(0 <= r["baselines"]["logprob_platt"] <= 1 for r in own)
        hits = [r["scores"]["correct"] for r in own]
        value = auroc([r["baselines"]["logprob_platt"] for r in own], hits)
        assert platt["auroc"] == value or (math.isnan(value) and platt["auroc"] is None)
    else:
        assert "the 8 validation answers are all right or all wrong" in result.stderr + result.stdout
    for key in ("auroc_within_question", "text_rule_auroc", "text_rule_ece", "distinct_questions"):
        assert key in final["metrics"], key
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "brier" in summary["eval_metrics"]
    assert {"control/accuracy", "none/accuracy"} <= summary["eval_metrics"].keys()
    assert summary["judge"]["judge/calls"] > 0 and "alerts" in summary
    # The end-of-run check of the number against the warm-up's (the default thresholds), recomputed from the files
    warm = json.loads((out / "eval_warmup.json").read_text())["metrics"]
    figures = [(m.get("auroc"), m.get("ece")) for m in (warm, final["metrics"])]  # null: not computable
    worse = ((None not in (figures[0][0], figures[1][0]) and figures[0][0] - figures[1][0] > 0.1)
             or (None not in (figures[0][1], figures[1][1]) and figures[1][1] - figures[0][1] > 0.05))
    assert ("calibration_regressed" in summary["alerts"]) == worse

    # Any saved oracle re-evaluates from its run directory, steering included, here stating each number as the mean
    # over the scale (eval.confidence_decoding=expected; refused with a sampled evaluation, before the model loads).
    refused = run_cli("ao_calib.eval", f"run_dir={out}", "confidence_decoding=expected", "temperature=0.7")
    assert refused.returncode == 2 and "cannot run with temperature=0.7" in refused.stderr
    assert_ok(run_cli("ao_calib.eval", f"run_dir={out}", "num_samples=4", "tag=cli", "confidence_decoding=expected"))
    cli = json.loads((out / "eval_cli.json").read_text())
    assert cli["num_samples"] == 4 and "ece" in cli["metrics"] and "control" in cli["variants"]
    assert "eval.confidence_decoding=expected" in cli["decoding"]
    scale = set(OmegaConf.load(out / "config.yaml").task.warmup_rows.confidences)
    assert all(r["scores"]["confidence"] is None or round(100 * r["scores"]["confidence"]) in scale
               for r in read_jsonl(out / "eval_predictions_cli.jsonl"))
    # ... or as that mean itself (eval.confidence_decoding=mean): a whole number, and every tag opened is closed
    assert_ok(run_cli("ao_calib.eval", f"run_dir={out}", "num_samples=4", "tag=cli_mean", "confidence_decoding=mean"))
    assert "eval.confidence_decoding=mean" in json.loads((out / "eval_cli_mean.json").read_text())["decoding"]
    assert all(r["scores"]["confidence"] is not None for r in read_jsonl(out / "eval_predictions_cli_mean.jsonl")
               if "[epistemic status:" in r["completion"])

    # A second run (a sweep job, a rerun) reads every activation from the cache instead of the model.
    again = tmp_path / "again"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "trainer.max_steps=1", "warmup.enabled=false",
                      "trainer.num_generations=2", "trainer.max_completion_length=4", "eval.enabled=false",
                      f"hydra.run.dir={again}"))
    texts, cached = map(int, re.search(r"activations: (\d+) texts, (\d+) cached",
                                       (again / "run.log").read_text()).groups())
    assert texts == cached > 0


def test_unknown_judge_for_oracle_is_a_clear_error(tmp_path):
    result = run_cli("ao_calib.run", "experiment=oracle_tiny", "judge=none", f"hydra.run.dir={tmp_path / 'x'}")
    assert result.returncode == 2 and "task=oracle needs a judge" in result.stderr


def test_pretrained_oracle_adapter_loads_from_a_local_path_and_trains(tmp_path):
    """model.ao_lora_id takes a hub id or a local path; here the adapter a previous run saved."""
    import torch
    from ao_calib.config.compose import compose_run_config
    from safetensors.torch import load_file

    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    first = tmp_path / "first"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "trainer.max_steps=1", "warmup.max_steps=2",
                      "warmup.lr=1e-2", "eval.enabled=false", f"hydra.run.dir={first}"))
    adapter = first / "adapter"
    cfg = compose_run_config(["experiment=oracle_tiny", f"model.ao_lora_id={adapter}"])
    assert build_task(cfg).requirements().adapter == str(adapter)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora, str(adapter))
    saved = load_file(adapter / "adapter_model.safetensors")
    loaded = {n: p for n, p in model.named_parameters() if "lora_" in n}
    assert loaded and all(p.requires_grad for p in loaded.values())
    some = next(k for k in saved if "lora_B" in k)
    match = [p for n, p in loaded.items() if n.replace(".default", "").endswith(some.split("base_model.model.")[-1])]
    assert match and torch.equal(match[0].detach(), saved[some])  # the trained weights, not a fresh init


def test_oracle_pipeline_on_the_gemma3_layout(tmp_path):
    out = tmp_path / "gemma"
    # every stage once (warm-up, GRPO, evaluation with its conditions), each as short as it goes
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "model=tiny_gemma3", "trainer.max_steps=1",
                      "warmup.max_steps=1", "eval.initial=false", "eval.num_samples=2", f"hydra.run.dir={out}"))
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "completed" and "rewards/calibration/mean" in summary["final_metrics"]


SECRET = "sk-test-" + "9" * 32


@pytest.fixture(scope="module")
def wildchat_judged_run(tmp_path_factory):
    """One GRPO run on WildChat-format questions (no reference answers) scored by a real litellm judge against a
    local OpenAI-compatible server, the API key in the environment only; two tests below read it."""
    from ao_calib.judges.rule_server import JudgeServer

    tmp_path = tmp_path_factory.mktemp("wildchat_judged")
    topics = ["my Python code crashes", "a birthday cake recipe", "planning a trip to Rome", "learning guitar chords"]
    records = [{"wildchat_question": f"Hi! Can you help me with {t}? Thanks a lot.", "language": "english",
                "oracle_questions": [f"Is this about {t.split()[-1]}?", "What is the main topic?"]} for t in topics]
    data = tmp_path / "wildchat.json"
    data.write_text(json.dumps(records))
    out = tmp_path / "wild"
    with JudgeServer() as server:
        result = run_cli("ao_calib.run", "task=oracle", "model=tiny_qwen3", "trainer.max_steps=1",
                         "trainer.batch_size=2", "trainer.num_generations=2", "trainer.max_completion_length=8",
                         "task.activations.k=3", "judge=litellm",
                         "judge.model=openai/test-judge", f"judge.api_base={server.api_base}",
                         f"judge.cache_dir={tmp_path / 'cache'}", "judge.backoff_s=0.01", f"task.data.path={data}",
                         "task.data.test_fraction=0.25", "eval.num_samples=2", f"hydra.run.dir={out}",
                         env={"OPENAI_API_KEY": SECRET})
    return SimpleNamespace(tmp_path=tmp_path, data=data, out=out, result=result, stats=server.stats)


def test_oracle_grpo_with_the_litellm_judge_keeps_the_key_secret(wildchat_judged_run):
    """GRPO scored by a real litellm judge against a local OpenAI-compatible server; the API key (from the
    environment only) appears nowhere in the run directory."""
    run = wildchat_judged_run
    assert_ok(run.result)
    assert run.stats.total > 0
    assert set(run.stats.auth) == {f"Bearer {SECRET}"}  # the key went where it belongs, and only there
    grpo = [r for r in read_jsonl(run.out / "metrics.jsonl") if r["stage"] == "train" and "reward" in r]
    assert grpo[0]["judge/calls"] > 0 and "judge/latency_mean_s" in grpo[0]
    summary = json.loads((run.out / "summary.json").read_text())
    assert summary["judge"]["judge/calls"] == run.stats.total  # training's and evaluation's calls, every one
    leaked = [p for p in run.out.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert leaked == [] and SECRET not in run.result.stdout + run.result.stderr


def test_grpo_on_wildchat_questions_scored_by_the_litellm_judge(wildchat_judged_run):
    run = wildchat_judged_run
    assert_ok(run.result)
    assert run.stats.total > 0
    report = json.loads((run.out / "eval.json").read_text())
    # No reference answers: the judge scores the held-out answers, and calibration is measured against it.
    m = report["metrics"]
    assert m["judge_failed"] == 0 and 0 <= m["informativeness"] <= 1 and {"auroc", "brier", "ece"} <= m.keys()
    refused = run_cli("ao_calib.run", "experiment=oracle_tiny", f"task.data.path={run.data}",
                      f"hydra.run.dir={run.tmp_path / 'refused'}")
    assert refused.returncode == 2 and "no reference answers" in refused.stderr


def test_local_judge_grades_with_the_base_model_and_masks_unparseable_replies(tmp_path):
    out = tmp_path / "local"
    assert_ok(run_cli("ao_calib.run", "experiment=oracle_tiny", "judge=local", "judge.max_new_tokens=8",
                      "warmup.enabled=false", "trainer.max_steps=1", "eval.enabled=false", f"hydra.run.dir={out}"))
    grpo = [r for r in read_jsonl(out / "metrics.jsonl") if r["stage"] == "train" and "reward" in r]
    # The tiny random base model writes no score, so every judgment is masked rather than scored 0.
    assert grpo and all(r["calibration/masked_fraction"] == 1.0 for r in grpo)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["judge"]["judge/calls"] == summary["judge"]["judge/failures"] > 0


@pytest.mark.slow
def test_the_seed_path_offline_pretrained_oracle_format_warmup_grpo_and_judged_calibration(tmp_path):
    """experiment=oracle_seed_tiny on WildChat-format data written here and a judge server that reads the text:
    a pretrained oracle that writes no tag (the stand-in), format warm-up, GRPO, held-out calibration against
    the judge."""
    from ao_calib.judges.rule_server import Behaviour, JudgeServer
    from ao_calib_tasks.oracle.rows.generate import generate_rows
    from ao_calib_tasks.oracle.judge_server import generated_truth_rule

    questions: dict[str, list[str]] = {}
    for row in generate_rows(90, 3, ("city", "mood", "topic"), seed=11):
        questions.setdefault(row["prompt"], []).append(row["question"])
    data = tmp_path / "wildchat.jsonl"
    data.write_text("\n".join(json.dumps({"wildchat_question": p, "language": "english", "oracle_questions": q})
                              for p, q in questions.items()))
    out = tmp_path / "seed"
    with JudgeServer(Behaviour(rule=generated_truth_rule)) as server:
        # the path, not its learning, is under test here: the stand-in (trained here, for this test alone), the
        # format warm-up and GRPO cut short, and the random-vector condition left out (tests/models/test_smollm2.py and
        # test_oracle_pipeline_run_directory evaluate under it)
        result = run_cli("ao_calib.run", "experiment=oracle_seed_tiny", f"task.data.path={data}",
                         "task.data.test_fraction=0.3", "judge.model=openai/reading-judge",
                         f"judge.api_base={server.api_base}", "task.stand_in.steps=60", "warmup.max_steps=60",
                         "trainer.max_steps=6", "trainer.save_steps=6", "eval.num_samples=24", "task.eval_none=false",
                         f"hydra.run.dir={out}")
        assert_ok(result)
        calls = server.stats.total
    reports = {tag: json.loads((out / name).read_text())["metrics"]
               for tag, name in (("initial", "eval_initial.json"), ("warmup", "eval_warmup.json"),
                                 ("final", "eval.json"))}
    print({tag: {k: round(m[k], 3) for k in ("parse_rate", "brier", "auroc", "informativeness", "confidence_std")}
           for tag, m in reports.items()})
    assert reports["initial"]["parse_rate"] <= 0.1  # the pretrained oracle writes no tag
    assert reports["final"]["parse_rate"] >= 0.9
    for m in reports.values():  # held-out calibration against the judge, every sample judged
        assert m["judge_failed"] == 0 and {"auroc", "brier", "resolution", "aurc"} <= m.keys()
    targets = read_jsonl(out / "warmup_targets.jsonl")
    assert targets and all(t["completion"].startswith("[epistemic status: ") for t in targets)
    # warmup.confidence=kind_mean: every question here is of one kind (binary): tags spread around its hit rate
    tags = [int(t["completion"].split("]")[0].rsplit(" ", 1)[1]) for t in targets]
    assert 1 < len(set(tags)) and max(tags) - min(tags) <= 20 and all(tag % 10 == 0 for tag in tags)
    # (Whether GRPO lowers the Brier score is a learning claim, measured over seeds in experiments/, not here: on this
    # tiny stand-in it flips with the number of math threads.)
    grpo = [r for r in read_jsonl(out / "metrics.jsonl") if r["stage"] == "train" and "advantage_std" in r]
    assert grpo and all(r["advantage_std"] > 0 for r in grpo)
    assert calls > 0
    # Judgments are cached: with the judge server gone, re-evaluating the final adapter is judged in full, from
    # the cache alone, to the same figures.
    assert_ok(run_cli("ao_calib.eval", f"run_dir={out}", "tag=again"))
    again = json.loads((out / "eval_again.json").read_text())["metrics"]
    assert again["judge_failed"] == 0 and again["brier"] == reports["final"]["brier"]
