"""bench.oracle_bed_ceiling: the bed's ceilings against a hand computation."""

import json

import pytest

from bench.oracle_bed_ceiling import bed_ceiling, main


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
