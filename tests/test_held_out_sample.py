"""Which held-out rows an evaluation of eval.num_samples rows scores."""

from ao_calib.evaluation.evaluate import held_out_sample


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
