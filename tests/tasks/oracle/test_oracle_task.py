"""Oracle data, the label judge and the calibration reward function, without a model."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest

from ao_calib.calibration import CalibrationConfig
from ao_calib.core.errors import DataValidationError
from ao_calib.judges import JudgeItem, LabelJudge
from ao_calib.judges.label import yes_no
from ao_calib_tasks.oracle.rows.files import load_labelled_rows
from ao_calib_tasks.oracle.rows.generate import generate_splits
from ao_calib_tasks.oracle.prompt import find_placeholder_positions, oracle_user_text
from ao_calib_tasks.oracle.rewards import make_oracle_reward


def test_synthetic_splits_are_disjoint_balanced_and_deterministic():
    train, test = generate_splits(200, 50, 3, ["topic", "mood", "city"], seed=1)
    assert {r["prompt"] for r in train}.isdisjoint({r["prompt"] for r in test})
    assert len({r["prompt"] for r in test}) == 50 and len(test) == 150
    for kind in ("topic", "mood", "city"):
        answers = Counter(r["answer"] for r in train if r["kind"] == kind)
        assert 0.35 < answers["Yes"] / sum(answers.values()) < 0.65, (kind, answers)
    assert generate_splits(200, 50, 3, ["topic", "mood", "city"], seed=1) == (train, test)
    for r in train:  # answers are true by construction
        if r["kind"] == "city":
            city = r["question"].removeprefix("Does the text mention ").rstrip("?")
            assert (city in r["prompt"]) == (r["answer"] == "Yes")


def test_oracle_prompt_and_placeholder_search():
    assert oracle_user_text(18, 3, "Is it?") == "Layer: 18\n ? ? ? \nIs it?"
    ids = [0, 0, 5, 9, 9, 9, 7, 9]  # left padding, a run of 3 placeholders, a later " ?" in the question
    assert find_placeholder_positions(ids, 9, 3) == [3, 4, 5]
    with pytest.raises(ValueError, match="expected 2 consecutive"):
        find_placeholder_positions(ids, 9, 2)
    with pytest.raises(ValueError, match="no placeholder"):
        find_placeholder_positions([1, 2], 9, 1)


@pytest.mark.parametrize("answer,expected", [("Yes", "yes"), ("no.", "no"), (" YES! it is", "yes"),
                                             ("Maybe", None), ("", None), ("No, it is not", "no")])
def test_yes_no_reading(answer, expected):
    assert yes_no(answer) == expected


def test_label_judge_scores_right_wrong_and_masks_unlabelled():
    judge = LabelJudge()
    items = [JudgeItem("p", "q", "Yes.", "Yes"), JudgeItem("p", "q", "No", "Yes"),
             JudgeItem("p", "q", "I think so", "No"), JudgeItem("p", "q", "Yes", None)]
    assert asyncio.run(judge.score(items)) == [1.0, 0.0, 0.0, None]
    assert judge.stats.failures == 1


def test_calibration_reward_function_scores_and_logs():
    logged: dict[str, list] = {}
    reward = make_oracle_reward(LabelJudge(), CalibrationConfig(lam=0.5))
    completions = [[{"role": "assistant", "content": "[epistemic status: 90] Yes"}],
                   [{"role": "assistant", "content": "[epistemic status: 90] Yes"}],
                   [{"role": "assistant", "content": "unsure, no tag"}]]
    out = asyncio.run(reward(prompts=None, completions=completions, answer=["Yes", "No", "No"],
                             question=["q"] * 3, source_prompt=["p"] * 3,
                             log_metric=lambda k, v: logged.setdefault(k, []).append(v)))
    assert out == pytest.approx([1 - 0.5 * 0.1**2, 0 - 0.5 * 0.9**2, 0 - 0.5 * 0.5**2])
    assert logged["calibration/parse_failure_rate"] == [pytest.approx(1 / 3)]
    assert logged["calibration/informativeness"] == [pytest.approx(1 / 3)]
    assert logged["calibration/confidence_mean"] == [pytest.approx((0.9 + 0.9 + 0.5) / 3)]
    assert logged["calibration/brier"] == [pytest.approx((0.01 + 0.81 + 0.25) / 3)]
    # AUROC over tagged samples: the right answer (0.9) ties the tagged wrong one (0.9); the untagged one is left out
    assert logged["calibration/auroc"] == [pytest.approx(0.5)]
    assert logged["calibration/resolution"] == [pytest.approx(2 / 3 * (0.5 - 1 / 3) ** 2 + 1 / 3 * (1 / 3) ** 2)]
    # An untagged answer is scored at confidence 50, so the judge's verdict still moves it; the penalty shifts it
    # by exactly its value and leaves tagged answers alone.
    untagged = [[{"role": "assistant", "content": "Yes"}]] * 2
    for penalty in (0.0, 0.3):
        rule = make_oracle_reward(LabelJudge(), CalibrationConfig(lam=0.5, untagged_penalty=penalty))
        out = asyncio.run(rule(prompts=None, completions=completions[:2] + untagged, answer=["Yes", "No", "Yes", "No"],
                               question=["q"] * 4, source_prompt=["p"] * 4))
        assert out == pytest.approx([0.995, -0.405, 1 - 0.125 - penalty, -0.125 - penalty])


def test_a_row_that_names_the_answers_its_label_was_drawn_from_is_scored_by_the_mean_over_them():
    """task.rl_rows.expected_over_draw: the judge scores the answer against each answer the label could have been and
    the row takes the mean (a yes/no answer 0.5 whichever the label is; another answer 0); a row naming none, or
    a batch without the column, is scored against its label; a failed judgment of any of them masks the row."""
    reward = make_oracle_reward(LabelJudge(), CalibrationConfig(lam=0.5))
    texts = ["[epistemic status: 50] Yes", "[epistemic status: 90] No", "[epistemic status: 50] maybe",
             "[epistemic status: 90] Yes", "[epistemic status: 90] Yes"]
    completions = [[{"role": "assistant", "content": text}] for text in texts]
    columns = dict(prompts=None, completions=completions, answer=["No", "No", "Yes", "Yes", "Yes"],
                   question=["q"] * 5, source_prompt=["p"] * 5)
    drawn = [["Yes", "No"]] * 3 + [[], ["Yes", None]]
    out = asyncio.run(reward(**columns, answer_drawn_from=drawn))
    assert out[:4] == pytest.approx([0.5, 0.5 - 0.5 * 0.4**2, 0.0 - 0.5 * 0.5**2, 1 - 0.5 * 0.1**2])
    assert out[4] is None
    assert asyncio.run(reward(**columns)) == pytest.approx([0 - 0.5 * 0.5**2, 1 - 0.5 * 0.1**2, 0 - 0.5 * 0.5**2,
                                                            1 - 0.5 * 0.1**2, 1 - 0.5 * 0.1**2])


def test_labelled_loader_names_row_and_field(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"prompt": "hi", "question": "Is it?", "answer": "yes", "extra": 1}) + "\n")
    assert load_labelled_rows(good)[0] == {"prompt": "hi", "question": "Is it?", "answer": "Yes", "extra": 1,
                                          "kind": "labelled"}
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"prompt": "hi", "question": "Is it?", "answer": "yes"}) + "\n"
                   + json.dumps({"prompt": "hi", "question": "Is it?", "answer": "perhaps"}) + "\n")
    with pytest.raises(DataValidationError, match=r"row 1, field 'answer'"):
        load_labelled_rows(bad)
    bad.write_text("{not json\n")
    with pytest.raises(DataValidationError, match="row 0"):
        load_labelled_rows(bad)


def test_wildchat_loader_flattens_keeps_extras_and_reports_bad_rows(tmp_path, caplog):
    from ao_calib_tasks.oracle.rows.files import load_wildchat

    records = [
        {"wildchat_question": "Help me fix my Python code", "language": "english", "oracle_questions": [
            "Is this user asking for help with programming?", "What is the main topic of the message?"],
         "turn": 3},
        {"wildchat_question": "", "language": "english", "oracle_questions": ["Is it?"]},
        {"wildchat_question": "Bonjour", "language": "french", "oracle_questions": "Is this French?"},
    ]
    path = tmp_path / "wild.json"
    path.write_text(json.dumps(records))
    ds = load_wildchat(path)
    assert ds.column_names and len(ds) == 2
    assert ds[0]["prompt"] == "Help me fix my Python code" and ds[0]["turn"] == 3 and ds[0]["language"] == "english"
    assert [r["question_type"] for r in ds] == ["binary", "open"]
    assert "row 1, field 'wildchat_question'" in caplog.text and "row 2, field 'oracle_questions'" in caplog.text
    with pytest.raises(DataValidationError, match="row 1"):
        load_wildchat(path, strict=True)
    jsonl = tmp_path / "wild.jsonl"
    jsonl.write_text(json.dumps(records[0]) + "\n{oops\n")
    assert len(load_wildchat(jsonl)) == 2
    with pytest.raises(FileNotFoundError):
        load_wildchat(tmp_path / "missing.jsonl")


def test_control_pairs_depend_on_the_dataset_only():
    """A row's control prompt is fixed by the prompts of its own dataset: adding other prompts to the activation
    store (as a classification evaluation does) or reordering the rows changes nothing."""
    import torch

    from ao_calib.steering import SteeringError
    from ao_calib_tasks.oracle.steering import ActivationSteering, pair_controls

    rows = pair_controls([{"activation_id": f"p{i}", "source_layer": 1} for i in range(7) for _ in range(2)])
    partner = {r["activation_id"]: r["control_activation_id"] for r in rows}
    assert all(p != a for a, p in partner.items()) and sorted(partner.values()) == sorted(partner)  # a cycle
    reordered = pair_controls([{k: v for k, v in r.items() if k != "control_activation_id"} for r in rows[::-1]])
    assert {r["activation_id"]: r["control_activation_id"] for r in reordered} == partner

    store = {f"p{i}": {1: torch.full((3, 2), float(i))} for i in range(7)}
    steering = ActivationSteering(store, placeholder_id=0)
    before = steering.control_vectors(rows)
    store.update({f"q{i}": {1: torch.full((3, 2), 100.0 + i)} for i in range(20)})  # another dataset's prompts
    after = steering.control_vectors(rows)
    assert all(torch.equal(b, a) for b, a in zip(before, after))
    assert all(not torch.equal(c, store[r["activation_id"]][1]) for c, r in zip(after, rows))

    alone = pair_controls([{"activation_id": "only", "source_layer": 1}])
    with pytest.raises(SteeringError, match="single prompt"):
        ActivationSteering({"only": {1: torch.ones(3, 2)}}, placeholder_id=0).control_vectors(alone)


@pytest.mark.parametrize("asked", [False, True])
def test_confidence_instruction_is_appended_only_when_asked(asked):
    import torch

    from ao_calib.calibration import CONFIDENCE_INSTRUCTION
    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import build_task
    from ao_calib_tasks.oracle.rows.oracle import activation_id, oracle_row

    cfg = compose_run_config(["experiment=oracle_tiny", f"task.prompt.confidence_instruction={str(asked).lower()}"])
    row = oracle_row({"prompt": "p", "question": "Is it?", "answer": "Yes"},
                     {activation_id("p"): {1: torch.zeros(3, 4)}}, (1, 80), build_task(cfg).config.prompt
                     .confidence_instruction)
    assert row["prompt"][-1]["content"].endswith(CONFIDENCE_INSTRUCTION) is asked
    assert "Is it?" in row["prompt"][-1]["content"]


def test_format_warmup_tags_answers_with_the_hit_rate_of_their_kind():
    """warmup.confidence=kind_mean: an answer's tag is the judge's mean score over its kind's own answers, which
    the oracle can know before answering (the answer's own score it cannot); masked answers stay untagged."""
    from ao_calib_tasks.oracle.rows.format_warmup import kind_means

    kinds = ["mood", "topic", "mood", "topic", "mood", "city"]
    scores = [0.95, 0.05, 0.95, 0.95, None, 0.05]
    assert kind_means(kinds, scores) == [0.95, 0.5, 0.95, 0.5, None, 0.05]


def test_the_none_condition_injects_random_vectors_with_the_norms_of_the_own_ones():
    """``none`` replaces the activations: the vectors differ from the row's own (and from every other prompt's),
    keep each position's norm, and are the same at every evaluation of the same row."""
    import torch

    from ao_calib_tasks.oracle.steering import ActivationSteering, pair_controls

    torch.manual_seed(0)
    store = {f"p{i}": {1: torch.randn(4, 8) * (i + 1), 2: torch.randn(4, 8)} for i in range(3)}
    rows = pair_controls([{"activation_id": f"p{i}", "source_layer": layer} for i in range(3) for layer in (1, 2)])
    steering = ActivationSteering(store, placeholder_id=0)
    own, none = steering.condition_vectors(rows, "own"), steering.condition_vectors(rows, "none")
    for o, n in zip(own, none):
        assert torch.allclose(n.norm(dim=-1), o.norm(dim=-1), rtol=1e-5)
        assert not torch.allclose(n, o) and torch.nn.functional.cosine_similarity(n, o, dim=-1).abs().max() < 0.9
    assert all(torch.equal(a, b) for a, b in zip(none, steering.condition_vectors(rows, "none")))
    assert not torch.equal(none[0], none[2])  # another prompt's noise is another draw
    ids = torch.tensor([[5, 0, 0, 0, 0, 6]] * len(rows))
    batch = steering.batch_for(rows, ids, condition="none")
    assert torch.allclose(batch.vectors[0], none[0])


@pytest.mark.parametrize("trainer", ["ppo", "rloo"])
def test_a_credit_rule_is_refused_with_a_trainer_that_cannot_apply_it(trainer):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError

    with pytest.raises(AOCalibError, match=f"task.calibration.credit=group cannot run with trainer={trainer}"):
        compose_run_config(["task=oracle", "model=tiny_qwen3", f"trainer={trainer}", "task.calibration.credit=group"])
    compose_run_config(["task=oracle", "model=tiny_qwen3", f"trainer={trainer}"])  # the default rule runs everywhere
    compose_run_config(["experiment=oracle_tiny", "trainer=grpo", "task.calibration.credit=group"])


def test_unstated_facts_vary_readability_inside_one_question_text():
    """stated_fraction < 1: the same question text is asked of prompts that state the fact and of prompts that do
    not (the answer then is the drawn fact, absent from the text); the three splits share no prompt; with the
    defaults the rows are the ones the generator always made."""
    from collections import defaultdict

    from ao_calib_tasks.oracle.rows.generate import generate_splits, true_answer

    train, validation, test = generate_splits(120, 40, 2, ["mood", "topic"], 5, n_validation_prompts=40,
                                              stated_fraction=0.5, phrasings=3)
    prompts = [{r["prompt"] for r in split} for split in (train, validation, test)]
    assert [len(p) for p in prompts] == [120, 40, 40]
    assert not (prompts[0] & prompts[1] or prompts[0] & prompts[2] or prompts[1] & prompts[2])
    readable = defaultdict(set)
    for r in train + validation + test:
        readable[r["question"]].add(r["readable"])
        if r["readable"]:  # a stated fact is in the text, where a reader of the text finds the same answer
            assert true_answer(r["prompt"], r["question"]) == r["answer"]
    assert len(readable) >= 20 and sum(len(v) == 2 for v in readable.values()) >= 10
    unstated = [r for r in train if not r["readable"]]
    assert 0.3 < len(unstated) / len(train) < 0.7 and 0.3 < sum(r["answer"] == "Yes" for r in unstated) / len(
        unstated) < 0.7
    old_train, old_test = generate_splits(30, 10, 3, ["topic", "mood", "city"], 0)
    assert all(r["readable"] for r in old_train + old_test) and len({r["question"] for r in old_train}) < 60
    assert {r["question"].split()[0] for r in old_train} <= {"Is", "Does"}


@pytest.mark.parametrize("experiment", ["quickstart", "oracle_smollm2"])
def test_each_oracle_preset_bed_varies_readability_inside_one_question_text(experiment):
    """The two presets the calibration bars are measured on: on their own test split, most mood question texts are
    asked both of prompts that state the mood and of prompts that do not, so that no rule reading the question text
    alone can tell which rows are readable; and the split holds both kinds of row in number."""
    from collections import defaultdict

    from ao_calib_tasks.oracle.rows.generate import generate_splits_for

    from ao_calib.config.compose import compose_run_config

    cfg = compose_run_config([f"experiment={experiment}"])
    _, validation, test = generate_splits_for(cfg.task.data.generate, cfg.trainer.seed)
    assert validation and test
    readable = defaultdict(set)
    for r in test:
        if r["kind"] == "mood":
            readable[r["question"]].add(r["readable"])
    assert readable and sum(v == {True, False} for v in readable.values()) >= len(readable) / 2
    unstated = sum(not r["readable"] for r in test)
    assert 0.05 * len(test) < unstated < 0.5 * len(test)



@pytest.mark.parametrize("seed", [0, 3])
def test_a_prompts_length_does_not_tell_whether_it_states_the_fact(seed):
    """With positions=full the oracle gets one vector per prompt token, so a bed where stating a fact makes the
    prompt longer lets it tell readable rows from the count alone. length_matched (the default) fills an unstated
    fact's place with text of the same length that states nothing: per kind, word and character counts rank
    readable rows no better than chance; without it they did (a mood sentence is the only one of its length)."""
    from sklearn.metrics import roc_auc_score

    from ao_calib_tasks.oracle.rows.generate import MOOD_WORDS, generate_splits, true_answer

    def length_auroc(rows, kind, size):
        rows = [r for r in rows if r["kind"] == kind]
        return roc_auc_score([r["readable"] for r in rows], [size(r["prompt"]) for r in rows])

    def words(text):
        return len(text.split())

    train, _ = generate_splits(600, 10, 2, ["mood", "topic"], seed, stated_fraction=0.75, phrasings=3)
    for kind in ("mood", "topic"):
        for size in (len, words):
            assert 0.4 < length_auroc(train, kind, size) < 0.6, (kind, size)
    mood_words = {w for forms in MOOD_WORDS.values() for w in forms}
    for r in train:
        if not r["readable"]:  # the filler states nothing: a reader of the text finds no fact, no mood word
            if r["kind"] == "mood":
                assert true_answer(r["prompt"], "Is the user in a positive mood?") == "No" and true_answer(
                    r["prompt"], "Is the user in a negative mood?") == "No"
                assert not set(r["prompt"].lower().replace(".", " ").replace("?", " ").split()) & mood_words
            else:
                assert all(true_answer(r["prompt"], f"Is this text about {t}?") == "No"
                           for t in ("cooking", "programming", "sports", "travel", "music", "health", "finance",
                                     "gardening"))
    before, _ = generate_splits(600, 10, 2, ["mood", "topic"], seed, stated_fraction=0.75, phrasings=3,
                                length_matched=False)
    assert length_auroc(before, "mood", words) > 0.85

def test_centring_takes_the_training_mean_off_every_vector_the_oracle_reads(tmp_path):
    """task.activations.center: the training prompts' vectors average to zero per layer; held-out vectors are the
    raw ones less that same training mean (nothing of the test split enters it)."""
    import torch

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    def built(center: bool):
        cfg = compose_run_config(["experiment=oracle_tiny", f"task.activations.center={str(center).lower()}",
                                  f"paths.cache_dir={tmp_path}"])
        source = models.model_source(cfg.model, cfg.paths.cache_dir)
        task = build_task(cfg)
        data = task.build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))
        return task, data

    _, raw_data = built(False)
    task, data = built(True)
    layer = data.train[0]["source_layer"]
    train_ids = sorted(set(data.train["activation_id"]))
    stacked = torch.cat([data.steering.store[a][layer].float() for a in train_ids])
    assert stacked.mean(0).abs().max() < 1e-4 and stacked.norm(dim=-1).mean() > 0
    mean = torch.cat([raw_data.steering.store[a][layer].float() for a in train_ids]).mean(0)
    for aid in set(data.test["activation_id"]):
        assert torch.allclose(data.steering.store[aid][layer], raw_data.steering.store[aid][layer] - mean,
                              atol=1e-5)


def test_the_oracle_never_reads_the_skipped_leading_tokens(tmp_path):
    """task.activations.skip_first reaches the extraction: with k above every prompt's length, each prompt's
    vectors are those of every token but the first, and each oracle prompt holds one placeholder per vector."""
    import torch

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task
    from ao_calib_tasks.oracle.prompt import PLACEHOLDER

    def built(skip: int):
        cfg = compose_run_config(["experiment=oracle_tiny", "task.activations.k=200", "task.activations.center=false",
                                  f"task.activations.skip_first={skip}", f"paths.cache_dir={tmp_path}"])
        source = models.model_source(cfg.model, cfg.paths.cache_dir)
        return build_task(cfg).build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))

    every, skipped = built(0), built(1)
    for row in skipped.train.to_list()[:20] + skipped.test.to_list()[:20]:
        layer, aid = row["source_layer"], row["activation_id"]
        vectors = skipped.steering.store[aid][layer]
        assert torch.equal(vectors, every.steering.store[aid][layer][1:])
        assert row["prompt"][0]["content"].count(PLACEHOLDER) == len(vectors)


@pytest.mark.parametrize("readable_only", [False, True])
def test_the_sft_warmup_can_train_on_readable_rows_alone(tmp_path, readable_only):
    """task.warmup_rows.readable_only: warmup=sft trains only on rows whose fact the prompt states (rows without the
    field count as readable); without it, on every row; the main stage and the held-out split always keep every
    row."""
    import datasets
    from omegaconf import OmegaConf

    from ao_calib.config.compose import compose_run_config
    from ao_calib.task_api import TaskData, build_task
    from ao_calib_tasks.oracle.steering import ActivationSteering

    cfg = compose_run_config(["experiment=oracle_tiny", f"task.warmup_rows.readable_only={str(readable_only).lower()}",
                              f"paths.cache_dir={tmp_path}"])
    task = build_task(cfg)
    rows = [{"question": f"q{i}", "readable": flag} for i, flag in enumerate([True, False, None, True, False])]
    data = TaskData(train=datasets.Dataset.from_list(rows), test=datasets.Dataset.from_list(rows),
                    steering=ActivationSteering({}, placeholder_id=0))
    sft = task.warmup_data(OmegaConf.create({"name": "sft"}), None, None, data, None)
    assert sft.train["question"] == (["q0", "q2", "q3"] if readable_only else [r["question"] for r in rows])
    assert len(sft.test) == len(rows)


def test_the_sft_warmup_can_ask_a_share_of_its_rows_as_open_questions(tmp_path):
    """task.warmup_rows.open_fraction: that share of the warm-up rows whose fact is known is asked as an open question
    whose target is the fact, with the same activations, layer, placeholders and drawn confidence; rows without a
    fact (no city named), the held-out split and the main stage keep their yes/no questions; out of range: refused."""
    from omegaconf import OmegaConf

    from ao_calib.calibration import parse_epistemic_status
    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task
    from ao_calib_tasks.oracle.rows.generate import OPEN_QUESTIONS

    cfg = compose_run_config(["experiment=oracle_tiny", "task.warmup_rows.open_fraction=0.5",
                              "task.data.generate.questions_per_prompt=3", f"paths.cache_dir={tmp_path}"])
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    task = build_task(cfg)
    data = task.build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))
    sft = task.warmup_data(OmegaConf.create({"name": "sft"}), None, None, data, None)
    assert sft.test is data.test and data.train["question"] == [r["question"] for r in data.train]
    before, after = data.train.to_list(), sft.train.to_list()
    assert len(before) == len(after)
    opened = [(b, a) for b, a in zip(before, after) if a["question"] != b["question"]]
    with_fact = [b for b in before if b.get("fact")]
    assert 0.35 < len(opened) / len(with_fact) < 0.65
    assert all(b.get("fact") for b, _ in opened) and any(not b.get("fact") for b in before)
    for b, a in opened:
        assert a["question"] in OPEN_QUESTIONS[b["kind"]] and a["answer"] == b["fact"]
        status, old = parse_epistemic_status(a["completion"]), parse_epistemic_status(b["completion"])
        assert status.answer == b["fact"] and status.confidence == old.confidence
        assert a["activation_id"] == b["activation_id"] and a["source_layer"] == b["source_layer"]
        text = a["prompt"][0]["content"]
        assert text.endswith(a["question"]) and text.count(" ?") == b["prompt"][0]["content"].count(" ?")
    assert {a["answer"] for b, a in zip(before, after) if a["question"] == b["question"]} <= {"Yes", "No"}
    with pytest.raises(Exception, match="warmup_rows.open_fraction"):
        compose_run_config(["experiment=oracle_tiny", "task.warmup_rows.open_fraction=1.5"])


def readable_only_warmup(tmp_path, *overrides) -> tuple[list[dict], list[dict]]:
    """The training rows oracle_tiny builds (70 % of facts stated) and the rows its SFT warm-up trains on with
    warmup_rows.readable_only and warmup_rows.open_fraction=0.5, plus ``overrides``."""
    from omegaconf import OmegaConf

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    cfg = compose_run_config(["experiment=oracle_tiny", "task.data.generate.stated_fraction=0.7",
                              "task.warmup_rows.readable_only=true", "task.warmup_rows.open_fraction=0.5", *overrides,
                              f"paths.cache_dir={tmp_path}"])
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    task = build_task(cfg)
    data = task.build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))
    return data.train.to_list(), task.warmup_data(OmegaConf.create({"name": "sft"}), None, None, data,
                                                  None).train.to_list()


def test_the_sft_warmup_can_teach_that_an_unstated_fact_is_not_stated(tmp_path):
    """task.warmup_rows.open_unstated with warmup_rows.readable_only: every readable row stays as it was (yes/no or
    open, the same rows warmup_rows.open_fraction chose without the option) and every unstated row is asked as the
    open question about its fact, answered "not stated", never as its coin-flip yes/no question."""
    from ao_calib.calibration import parse_epistemic_status
    from ao_calib_tasks.oracle.rows.generate import NOT_STATED, OPEN_QUESTIONS

    built, without = readable_only_warmup(tmp_path)
    _, with_unstated = readable_only_warmup(tmp_path, "task.warmup_rows.open_unstated=true")
    unstated = [r for r in built if r["readable"] is False]
    assert unstated and all(r["readable"] is not False for r in without)
    assert [r for r in with_unstated if r["readable"] is not False] == without
    asked = [r for r in with_unstated if r["readable"] is False]
    assert [r["activation_id"] for r in asked] == [r["activation_id"] for r in unstated]
    for row in asked:
        assert row["question"] in OPEN_QUESTIONS[row["kind"]] and row["answer"] == NOT_STATED
        assert parse_epistemic_status(row["completion"]).answer == NOT_STATED


def test_the_sft_warmup_can_keep_unstated_rows_with_their_tag_alone_in_the_loss(tmp_path):
    """task.warmup_rows.unstated_tag_only with warmup_rows.readable_only: the readable rows stay exactly as without it
    (yes/no or open, the same draws) with the answer in the loss; every unstated row comes back as its own yes/no
    question marked answer_in_loss=false (its coin-flip answer leaves the loss, its tag stays); with
    warmup_rows.open_unstated: refused."""
    from ao_calib.config.compose import compose_run_config

    built, without = readable_only_warmup(tmp_path)
    _, with_unstated = readable_only_warmup(tmp_path, "task.warmup_rows.unstated_tag_only=true")
    unstated = [r for r in built if r["readable"] is False]
    readable = [r for r in with_unstated if r["readable"] is not False]
    assert unstated and all(r["answer_in_loss"] and r["answer_drawn_from"] == [] for r in readable)
    added = ("answer_in_loss", "answer_drawn_from")
    assert [{k: v for k, v in r.items() if k not in added} for r in readable] == without
    kept = [r for r in with_unstated if r["readable"] is False]
    assert [{k: v for k, v in r.items() if k not in added} for r in kept] == unstated
    # the label of a row the oracle cannot read is Yes or No with probability 1/2 (warmup.calibration_expected_over_draw)
    assert all(r["answer_in_loss"] is False and r["answer"] in ("Yes", "No")
               and r["answer_drawn_from"] == ["Yes", "No"] for r in kept)
    with pytest.raises(Exception, match="task.warmup_rows.unstated_tag_only=true: out of range with "
                                        "warmup_rows.open_unstated=true"):
        compose_run_config(["experiment=oracle_tiny", "task.warmup_rows.unstated_tag_only=true",
                            "task.warmup_rows.open_unstated=true"])


def test_the_sft_warmup_can_add_rows_that_read_random_vectors_with_their_tag_alone_in_the_loss(tmp_path, monkeypatch):
    """task.warmup_rows.none_fraction: the warm-up's own rows stay exactly as without it (the same open-question draws);
    copies of its yes/no rows, that share of the whole, inject random vectors of the norms of the row's own (the
    same vectors every time), stay yes/no questions and keep their answer out of the loss. Refused without an SFT
    warm-up."""
    import torch

    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError
    from ao_calib.task_api import build_task
    from ao_calib_tasks.oracle.rows.oracle import NONE_ID_PREFIX
    from ao_calib_tasks.oracle.task import OracleTask

    built, without = readable_only_warmup(tmp_path, "task.warmup_rows.unstated_tag_only=true")
    seen, original = [], OracleTask.warmup_data
    # the data the warm-up is given, to read the vectors its steering holds
    monkeypatch.setattr(OracleTask, "warmup_data", lambda self, *a: seen.append(a[3]) or original(self, *a))
    tag_only, none = "task.warmup_rows.unstated_tag_only=true", "task.warmup_rows.none_fraction=0.2"
    _, rows = readable_only_warmup(tmp_path, tag_only, none)
    noise = [r for r in rows if r["activation_id"].startswith(NONE_ID_PREFIX)]
    assert [r for r in rows if r not in noise] == without
    assert len(noise) / len(rows) == pytest.approx(0.2, abs=1 / len(rows))
    yes_no = {(r["activation_id"], r["question"], r["answer"]) for r in built}  # each before any open question
    store = seen[-1].steering.store
    for row in noise:
        assert (row["activation_id"][len(NONE_ID_PREFIX):], row["question"], row["answer"]) in yes_no
        assert row["answer_in_loss"] is False and row["readable"] is False
        assert row["answer_drawn_from"] == ["Yes", "No"]
        injected = store[row["activation_id"]][row["source_layer"]]
        own = store[row["activation_id"][len(NONE_ID_PREFIX):]][row["source_layer"]]
        assert injected.shape == own.shape and not torch.allclose(injected, own)
        assert torch.allclose(injected.norm(dim=-1), own.norm(dim=-1), rtol=1e-4)
    _, again = readable_only_warmup(tmp_path, tag_only, none)
    assert again == rows
    for overrides in (["warmup=format"], ["trainer=grpo"]):  # the last: no warm-up
        with pytest.raises(AOCalibError, match="task.warmup_rows.none_fraction=0.2 adds rows to an SFT warm-up"):
            build_task(compose_run_config(["task=oracle", "model=tiny_qwen3", "judge=label",
                                           "task.warmup_rows.none_fraction=0.2", *overrides]))


def test_rl_rows_carry_random_vectors_and_the_unreadable_share_in_the_main_stage_only(tmp_path):
    """task.rl_rows.unreadable_fraction keeps every training row about an unstated fact and leaves readable ones out
    until they make that share; task.rl_rows.none_fraction then adds copies whose activation id names random vectors
    with the norms of the row's own (per position). Only the main stage sees either: the warm-up and the held-out
    split keep the rows build_data made."""
    import torch
    from omegaconf import OmegaConf

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task
    from ao_calib_tasks.oracle.rows.oracle import NONE_ID_PREFIX

    cfg_overrides = ["experiment=oracle_tiny", "task.data.generate.stated_fraction=0.8",
                     "task.rl_rows.none_fraction=0.25", "task.rl_rows.unreadable_fraction=0.4",
                     f"paths.cache_dir={tmp_path}"]
    cfg = compose_run_config(cfg_overrides)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    task = build_task(cfg)
    data = task.build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))
    built = data.train.to_list()
    assert not any(r["activation_id"].startswith(NONE_ID_PREFIX) for r in built)
    main = task.main_stage_data(cfg.trainer, data)
    rows = main.train.to_list()
    noise = [r for r in rows if r["activation_id"].startswith(NONE_ID_PREFIX)]
    real = [r for r in rows if not r["activation_id"].startswith(NONE_ID_PREFIX)]
    assert len(noise) / len(rows) == pytest.approx(0.25, abs=1 / len(rows))
    unstated = [r for r in built if r["readable"] is False]
    assert [r for r in real if r["readable"] is False] == unstated  # every one kept, in order
    assert len(unstated) / len(real) == pytest.approx(0.4, abs=1 / len(real))
    assert all(r in built for r in real)
    assert main.test.to_list() == data.test.to_list()
    for row in noise[:20]:
        layer = row["source_layer"]
        injected = main.steering.vectors([row])[0]
        own = main.steering.store[row["activation_id"][len(NONE_ID_PREFIX):]][layer]
        assert injected.shape == own.shape and not torch.allclose(injected, own)
        assert torch.allclose(injected.norm(dim=-1), own.norm(dim=-1), rtol=1e-4)
        assert row["readable"] is False
    assert task.main_stage_data(cfg.trainer, data).train.to_list() == rows  # the same rows when resumed
    # task.rl_rows.expected_over_draw: the same rows, each unreadable yes/no one naming both answers its label could be
    drawn = build_task(compose_run_config([*cfg_overrides, "task.rl_rows.expected_over_draw=true"]))
    drawn_rows = drawn.main_stage_data(cfg.trainer, drawn.build_data(
        models.load_tokenizer(source), models.load_base_model(cfg.model, source))).train.to_list()
    assert [{k: v for k, v in r.items() if k != "answer_drawn_from"} for r in drawn_rows] == rows
    assert all(r["answer_drawn_from"] == (["Yes", "No"] if r["readable"] is False else []) for r in drawn_rows)
    assert any(r["answer_drawn_from"] for r in drawn_rows) and any(not r["answer_drawn_from"] for r in drawn_rows)
    warmup = task.warmup_data(OmegaConf.create({"name": "sft"}), None, None, data, None).train.to_list()
    assert not any(r["activation_id"].startswith(NONE_ID_PREFIX) for r in warmup)
    assert len(warmup) == len(built)


def test_rl_reserved_prompts_split_the_training_prompts_between_warmup_and_rl(tmp_path):
    """task.rl_rows.reserved_prompts: whole prompts, that share of them, train the RL stage only and the others the
    warm-up only (so the RL stage never calibrates against rows the warm-up fitted); the held-out split is
    untouched, the draw repeats, and a run without a warm-up refuses the key."""
    from omegaconf import OmegaConf

    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError
    from ao_calib.models import loading as models
    from ao_calib.task_api import build_task

    overrides = ["experiment=oracle_tiny", "task.data.generate.stated_fraction=0.8",
                 "task.rl_rows.reserved_prompts=0.3", f"paths.cache_dir={tmp_path}"]
    cfg = compose_run_config(overrides)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    task = build_task(cfg)
    data = task.build_data(models.load_tokenizer(source), models.load_base_model(cfg.model, source))
    built = data.train.to_list()
    warmup = task.warmup_data(OmegaConf.create({"name": "sft"}), None, None, data, None).train.to_list()
    main = task.main_stage_data(cfg.trainer, data)
    rl = main.train.to_list()
    prompts = {r["source_id"] for r in built}
    warm_prompts, rl_prompts = {r["source_id"] for r in warmup}, {r["source_id"] for r in rl}
    assert not warm_prompts & rl_prompts and warm_prompts | rl_prompts == prompts
    assert len(rl_prompts) == round(0.3 * len(prompts))
    assert sorted(map(str, warmup + rl)) == sorted(map(str, built))  # every row, on one side, unchanged
    assert main.test.to_list() == data.test.to_list()
    assert task.main_stage_data(cfg.trainer, data).train.to_list() == rl
    with pytest.raises(AOCalibError, match="task.rl_rows.reserved_prompts=0.3 keeps prompts from a warm-up"):
        build_task(compose_run_config(["task=oracle", "model=tiny_qwen3", "judge=label", "trainer=grpo",
                                       "task.rl_rows.reserved_prompts=0.3"]))


@pytest.mark.parametrize("key", ["rl_rows.none_fraction=0.2", "rl_rows.unreadable_fraction=0.2",
                                 "rl_rows.expected_over_draw=True", "rl_rows.reserved_prompts=0.2"])
def test_rl_rows_are_refused_when_the_main_stage_is_sft(key):
    from ao_calib.config.compose import compose_run_config
    from ao_calib.core.errors import AOCalibError
    from ao_calib.task_api import build_task

    with pytest.raises(AOCalibError, match=f"task.{key} shapes the rows of an RL stage"):
        build_task(compose_run_config(["task=oracle", "model=tiny_qwen3", "judge=label", "trainer=sft",
                                       f"task.{key}"]))
