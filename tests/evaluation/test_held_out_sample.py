"""Which held-out rows an evaluation of eval.num_samples rows scores."""

from ao_calib.evaluation.evaluate import held_out_sample, rows_of_records


def test_a_cut_draws_from_the_whole_file_in_file_order():
    # a file grouped by kind (a BFCL folder, an oracle bed): 20 rows of one kind, then 20 of another
    kinds = ["simple"] * 20 + ["parallel"] * 20
    chosen = held_out_sample(len(kinds), 10, seed=0)
    assert len(chosen) == len(set(chosen)) == 10
    assert chosen == sorted(chosen)
    assert {kinds[i] for i in chosen} == {"simple", "parallel"}, "the first rows would be one kind only"


def test_the_same_seed_draws_the_same_rows_and_another_seed_others():
    assert held_out_sample(1000, 50, seed=3) == held_out_sample(1000, 50, seed=3)
    assert held_out_sample(1000, 50, seed=3) != held_out_sample(1000, 50, seed=4)


def test_no_cut_or_a_cut_above_the_file_scores_every_row():
    assert held_out_sample(7, None, seed=0) == list(range(7))
    assert held_out_sample(7, 7, seed=0) == list(range(7))
    assert held_out_sample(7, 50, seed=0) == list(range(7))


def test_the_rows_behind_an_evaluations_records_are_the_drawn_sample_not_the_first_rows():
    # 16 held-out rows, an evaluation of 8 (a baseline read off "the first 8" would score other rows)
    rows = [{"source_id": f"p{i // 2}", "question": f"q{i % 2}", "label": i} for i in range(16)]
    records = [{"source_id": r["source_id"], "question": r["question"], "completion": "x"}
               for r in (rows[i] for i in held_out_sample(16, 8, seed=5))]
    found = rows_of_records(rows, records, seed=5, keys=("source_id", "question"))
    assert [r["label"] for r in found] == held_out_sample(16, 8, seed=5) != list(range(8))
    # records of another draw (another eval.seed) are refused, not matched to the wrong rows
    assert rows_of_records(rows, records, seed=6, keys=("source_id", "question")) is None
    # every row evaluated: all of them, in order
    everything = [{"source_id": r["source_id"], "question": r["question"]} for r in rows]
    assert rows_of_records(rows, everything, seed=0, keys=("source_id", "question")) == rows
