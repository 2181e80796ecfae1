"""experiments.oracle_reading_loop on the quickstart's bed (mood and city questions): it trains, and scores every kind
the bed asks about, the city included, as yes/no and as open questions."""

import json

from tests.helpers.commands import run_cli


def test_the_reading_loop_scores_every_kind_of_the_quickstart_bed(tmp_path):
    out = tmp_path / "curve.jsonl"
    result = run_cli("experiments.oracle_reading_loop", "--experiment", "quickstart", "--steps", "2", "--every", "2",
                     "--eval-rows", "24", "--seed", "3", "--out", str(out), "task.warmup_rows.open_fraction=0.5",
                     "task.data.generate.n_train_prompts=24", "task.data.generate.n_validation_prompts=12",
                     "task.data.generate.n_test_prompts=12")
    assert result.returncode == 0, result.stderr[-3000:]
    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert record["step"] == 2 and record["examples"] == 32
    for form in ("yes_no_own", "yes_no_none", "open_own", "open_none"):
        assert "city" in record[form] and 0.0 <= record[form]["city"] <= 1.0, (form, record[form])
        assert any(kind.startswith("mood") for kind in record[form]), (form, record[form])
