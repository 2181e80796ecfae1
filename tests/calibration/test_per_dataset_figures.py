"""Per-dataset and pooled confidence figures, against hand computations on a handful of rows."""

from __future__ import annotations

import json
import math

import pytest

from ao_calib.calibration.per_dataset import dataset_figures, figures_table, grouped
from ao_calib.reporting.plot import plot_pooled_reliability


def _row(dataset, question, condition, correct, confidence, baselines=None, probe_correct=None, **extra):
    row = {"dataset": dataset, "question": question, "condition": condition,
           "scores": {"correct": correct, "confidence": confidence, "parsed": float(confidence is not None)},
           "baselines": baselines or {}, **extra}
    if probe_correct is not None:
        row["baseline_correct"] = {"probe": probe_correct}
    return row


def _rows() -> list[dict]:
    """A: 4 own rows over two questions, 2 none rows. C: 2 own rows, a question worded as one of A's. B (OOD): 2
    own rows, both right. One masked judgment (no outcome), left out."""
    return [
        _row("A", "q1", "own", 1.0, 0.9, {"logprob": 0.8, "probe": 0.9}, 1.0),
        _row("A", "q2", "own", 1.0, None, {"logprob": 0.7, "probe": 0.6}, 1.0),  # untagged: counts as 0.5
        _row("A", "q1", "own", 0.0, 0.6, {"logprob": 0.9, "probe": 0.7}, 1.0),
        _row("A", "q2", "own", 0.0, 0.2, {"logprob": 0.1, "probe": 0.8}, 0.0),
        _row("A", "q1", "none", 1.0, 0.5),
        _row("A", "q2", "none", 0.0, None),
        _row("C", "q1", "own", 1.0, 0.4, {"logprob": 0.6}),
        _row("C", "q1", "own", 0.0, 0.3, {"logprob": 0.5}),
        _row("B", "q1", "own", 1.0, 0.7, {"logprob": 0.4}),
        _row("B", "q1", "own", 1.0, 0.8, {"logprob": 0.9}),
        {"dataset": "B", "question": "q1", "condition": "own", "scores": {"confidence": 0.9, "judge_failed": 1.0}},
    ]


def test_one_dataset_by_hand():
    a = dataset_figures(_rows(), ood_datasets={"B"})["datasets"]["A"]
    assert a["n"] == {"own": 4, "none": 2}
    assert a["accuracy"] == {"own": 0.5, "none": 0.5, "probe": 0.75}
    assert a["untagged"] == {"own": 1, "none": 1}
    assert a["mean_stated_confidence"] == pytest.approx({"own": 0.55, "none": 0.5})
    stated = a["methods"]["stated"]
    # right rows state 0.9 and 0.5 (untagged), wrong rows 0.6 and 0.2: 3 of 4 pairs ordered
    assert stated["auroc"] == pytest.approx(0.75)
    assert stated["auroc_within_question"] == pytest.approx(1.0)  # q1: 0.9 > 0.6, q2: 0.5 > 0.2
    assert stated["ece"] == pytest.approx((0.1 + 0.5 + 0.6 + 0.2) / 4)  # each row alone in its bin
    assert stated["brier"] == pytest.approx((0.01 + 0.25 + 0.36 + 0.04) / 4)
    assert stated["mean_confidence"] == pytest.approx(0.55)
    logprob = a["methods"]["logprob"]
    assert logprob["auroc"] == pytest.approx(0.5)  # right 0.8, 0.7 against wrong 0.9, 0.1
    assert logprob["auroc_within_question"] == pytest.approx(0.5)  # q1: 0.8 < 0.9, q2: 0.7 > 0.1
    assert logprob["brier"] == pytest.approx((0.04 + 0.09 + 0.81 + 0.01) / 4)
    assert logprob["ece"] == pytest.approx((0.2 + 0.3 + 0.9 + 0.1) / 4)
    assert "accuracy" not in logprob
    probe = a["methods"]["probe"]  # scored against its own answers: right, right, right, wrong
    assert probe["accuracy"] == 0.75
    assert probe["auroc"] == pytest.approx(1 / 3)  # its wrong answer (0.8) beats two of its three right ones
    assert probe["brier"] == pytest.approx((0.01 + 0.16 + 0.09 + 0.64) / 4)
    assert a["notes"] == []


def test_pools_by_hand_keep_a_question_within_its_dataset():
    figures = dataset_figures(_rows(), ood_datasets={"B"})
    pooled_id = figures["pooled"]["in_distribution"]
    assert pooled_id["datasets"] == ["A", "C"]
    assert pooled_id["accuracy"]["own"] == pytest.approx(3 / 6)
    stated = pooled_id["methods"]["stated"]
    assert stated["auroc"] == pytest.approx(7 / 9)  # right 0.9, 0.5, 0.4 against wrong 0.6, 0.2, 0.3
    # A's q1, A's q2 and C's q1 each order their right row first; pooling C's q1 with A's would give (0.75·4+2)/6
    assert stated["auroc_within_question"] == pytest.approx(1.0)
    assert pooled_id["methods"]["probe"]["n"] == 4
    assert "probe: on 4 of 6 own-condition rows" in pooled_id["notes"]
    assert figures["ood_datasets"] == ["B"] and figures["ood_datasets_absent"] == []


def test_a_dataset_all_right_has_no_auroc_and_says_so():
    figures = dataset_figures(_rows(), ood_datasets={"B", "ner"})
    b = figures["datasets"]["B"]
    assert b["n"] == {"own": 2}  # the masked judgment is left out
    assert math.isnan(b["methods"]["stated"]["auroc"]) and math.isnan(b["methods"]["logprob"]["auroc"])
    assert b["methods"]["stated"]["ece"] == pytest.approx((0.3 + 0.2) / 2)
    assert b["methods"]["stated"]["brier"] == pytest.approx((0.09 + 0.04) / 2)
    assert "stated: AUROC undefined: all 2 of the answers are right" in b["notes"]
    assert figures["pooled"]["out_of_distribution"]["notes"] == b["notes"]
    assert figures["ood_datasets_absent"] == ["ner"]
    table = figures_table(figures)
    assert "| B | stated | 2 | 0.750 | n/a | n/a | 0.250 | 0.065 |" in table
    assert "| A | 4 | 0.500 | 0.500 | - | 0.750 | 1 |" in table
    assert "| pooled ID (2 sets) | stated | 6 |" in table
    assert "- B: stated: AUROC undefined: all 2 of the answers are right" in table
    assert "OOD sets named but without rows: ner" in table


def test_all_wrong_is_named_wrong():
    rows = [_row("X", "q", "own", 0.0, 0.9), _row("X", "q", "own", 0.0, 0.1)]
    notes = dataset_figures(rows, ood_datasets=())["datasets"]["X"]["notes"]
    assert notes == ["stated: AUROC undefined: all 2 of the answers are wrong"]


def test_the_in_distribution_flag_gives_the_same_pools():
    flagged = [{**row, "in_distribution": row["dataset"] != "B"} for row in _rows()]
    # compared as JSON text: B's undefined AUROC is NaN, which equals nothing
    assert json.dumps(dataset_figures(flagged)) == json.dumps(dataset_figures(_rows(), ood_datasets={"B"}))


@pytest.mark.parametrize("change,message", [
    (lambda r: r.pop("dataset"), "row 0: no field dataset"),
    (lambda r: r.pop("condition"), "row 0: no field condition"),
    (lambda r: r.update(condition="sideways"), "row 0: condition must be one of"),
    (lambda r: r["baselines"].update(logprob=1.5), r"row 0: baselines.logprob must be a number in \[0, 1\]"),
    (lambda r: r["scores"].update(confidence="high"), r"row 0: scores.confidence must be a number"),
])
def test_bad_rows_are_refused_by_row_and_field(change, message):
    rows = _rows()
    change(rows[0])
    with pytest.raises(ValueError, match=message):
        dataset_figures(rows, ood_datasets={"B"})


def test_without_a_flag_or_ood_names_it_is_refused():
    with pytest.raises(ValueError, match="row 0: no boolean field in_distribution"):
        grouped(_rows())
    mixed = [{**row, "in_distribution": i != 1} for i, row in enumerate(_rows())]
    with pytest.raises(ValueError, match="dataset 'A' has rows both in and out of distribution"):
        grouped(mixed)


def test_one_reliability_diagram_per_pooled_group(tmp_path):
    paths = plot_pooled_reliability(_rows(), tmp_path, "final", ood_datasets={"B"})
    assert [p.name for p in paths] == ["reliability_final_in_distribution.png",
                                       "reliability_final_out_of_distribution.png"]
    assert all(p.stat().st_size > 1000 for p in paths)
    probe = plot_pooled_reliability(_rows(), tmp_path, "final", ood_datasets={"B"}, method="probe")
    assert [p.name for p in probe] == ["reliability_final_in_distribution_probe.png"]  # B's rows carry no probe
