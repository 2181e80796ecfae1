"""experiments.oracle_bed_ceiling: the bed's ceilings against a hand computation."""

import json
import math

import pytest

from experiments.oracle_bed_ceiling import bed_ceiling, main, segments


def _row(readable, correct, confidence, platt=None):
    row = {"readable": readable, "scores": {"correct": float(correct), "confidence": confidence},
           "condition": "own", "source_id": "p", "question": "q"}
    if platt is not None:
        row["baselines"] = {"logprob_platt": platt}
    return row


# four stated rows (three right), two unstated (one right)
ROWS = [_row(True, 1, 1.0, 0.9), _row(True, 1, 0.9, 0.8), _row(True, 1, 0.5, 0.7), _row(True, 0, 0.6, 0.95),
        _row(False, 1, 0.5, 0.6), _row(False, 0, 0.5, 0.55)]


def test_ceilings_by_hand():
    c = bed_ceiling(ROWS, [r["baselines"]["logprob_platt"] for r in ROWS])
    assert (c.rows, c.unstated) == (6, 2)
    assert c.accuracy_ceiling == pytest.approx(4 / 6 + 0.5 * 2 / 6)
    assert (c.accuracy, c.accuracy_stated, c.accuracy_unstated) == pytest.approx((4 / 6, 3 / 4, 1 / 2))
    # readability alone: of the 4 x 2 (right, wrong) pairs, stated-right vs unstated-wrong are won (3), stated-right
    # vs stated-wrong tie (3 halves), unstated-right vs unstated-wrong tie (a half), unstated-right vs stated-wrong lost
    assert c.auroc_readability == pytest.approx(5 / 8)
    # the ceiling puts the stated wrong row last: all won but the unstated pair's tie
    assert c.auroc_ceiling == pytest.approx(7.5 / 8)
    # the oracle: right 1.0, 0.9, 0.5, 0.5 against wrong 0.6, 0.5 -> 2 + 2 + (0 + 0.5) + (0 + 0.5) = 5
    assert c.auroc_oracle == pytest.approx(5 / 8)
    # Platt: right 0.9, 0.8, 0.7, 0.6 against wrong 0.95, 0.55 -> one win each
    assert c.auroc_platt == pytest.approx(4 / 8)
    # stated (4) against unstated (2) rows: the number 1.0, 0.9 win both, 0.5 ties both, 0.6 wins both
    assert c.readable_auroc_oracle == pytest.approx(7 / 8)
    assert c.readable_auroc_platt == pytest.approx(1.0)


def test_rows_without_readability_are_refused():
    with pytest.raises(ValueError, match="readable"):
        bed_ceiling([{"scores": {"correct": 1.0, "confidence": 0.5}}])


def test_command_reads_platt_from_the_rows(tmp_path, capsys):
    path = tmp_path / "eval_predictions.jsonl"
    other = dict(ROWS[0], condition="none", readable=None)  # other conditions are left out
    path.write_text("".join(json.dumps(r) + "\n" for r in [*ROWS, other]))
    main([str(path)])
    line = capsys.readouterr().out.splitlines()[2]
    assert "| 6 | 2 | 0.833 | 0.667 | 0.750 / 0.500 | 0.625 | 0.938 | 0.625 | 0.500 | +0.438 | 0.875 / 1.000 |" in line


def test_segments_by_hand(tmp_path, capsys):
    # ROWS with kinds: the stated rows split into two mood rows (right 1.0, wrong 0.6) and two city rows (right 0.9
    # and 0.5), the unstated rows are mood rows
    kinds = ["mood", "city", "city", "mood", "mood", "mood"]
    rows = [dict(r, kind=k, baselines={"logprob": p}) for r, k, p in zip(ROWS, kinds, [0.9, 0.8, 0.7, 0.95, 0.6, 0.55])]
    table, rule, rule_then_answer = segments(rows, [r["baselines"]["logprob"] for r in rows])
    by_key = {(g.kind, g.readable): g for g in table}
    assert sorted(by_key) == [("city", True), ("mood", False), ("mood", True)]
    stated_mood = by_key[("mood", True)]
    assert (stated_mood.rows, stated_mood.accuracy) == (2, 0.5)
    assert (stated_mood.mean_number, stated_mood.mean_answer_probability) == pytest.approx((0.8, 0.925))
    # inside: the right row's number 1.0 beats the wrong one's 0.6; its answer probability 0.9 loses to 0.95
    assert (stated_mood.auroc_number, stated_mood.auroc_answer_probability) == (1.0, 0.0)
    assert math.isnan(by_key[("city", True)].auroc_number)  # both city rows right
    assert by_key[("mood", False)].auroc_number == 0.5  # a tie
    # the segment rule: city rows at 1.0, the others at 0.5; right (1, 1, 0.5, 0.5) against wrong (0.5, 0.5):
    # 2 + 2 + 0.5 + 0.5 + 0.5 + 0.5 = 6 of 8
    assert rule == pytest.approx(6 / 8)
    # ties broken by the answer probability: city rows first, then the mood rows by 0.95 (wrong) > 0.9 (right) > 0.6
    # (right) > 0.55 (wrong): right rows 0.9 and 0.6 each beat only the 0.55 row, the city rows beat both wrong ones
    assert rule_then_answer == pytest.approx(6 / 8)
    # with the wrong stated mood row's answer probability the lowest, every right row outranks both wrong ones
    _, _, better = segments(rows, [0.9, 0.8, 0.7, 0.5, 0.6, 0.55])
    assert better == 1.0
    path = tmp_path / "eval_predictions.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    main([str(path), "--segments"])
    out = capsys.readouterr().out
    assert "answer probability raw" in out
    assert "| mood | yes | 2 | 0.500 | 0.800 | 0.925 | 1.000 | 0.000 |" in out
