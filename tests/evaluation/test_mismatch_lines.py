"""The closing lines of an evaluation show what a wrong row answered: for an episode, every assistant message."""

from ao_calib.evaluation.evaluate import _print_summary


class Scored:
    headline_metric = "bfcl_ast"


def test_a_wrong_episode_shows_its_calls_not_only_its_last_message(capsys):
    episode = [{"role": "assistant", "content": "[cd(folder='canyon')]"}, {"role": "tool", "content": "{}"},
               {"role": "assistant", "content": "Done."}, {"role": "user", "content": "Now move it."},
               {"role": "assistant", "content": "Done."}]
    records = [{"expected": '[["cd(folder=\'canyon\')"], ["mv(source=\'a\', destination=\'b\')"]]',
                "completion": "Done.", "episode": episode, "scores": {"bfcl_ast": 0.0}},
               {"expected": "4", "completion": '{"final": "5"}', "scores": {"bfcl_ast": 0.0}},
               {"expected": "", "completion": "Done.", "episode": episode, "scores": {"bfcl_ast": 1.0}}]
    _print_summary(Scored(), "final", {"accuracy": 1 / 3}, records, shown=1, where="eval_predictions.jsonl")
    out = capsys.readouterr().out
    assert "got      \"[cd(folder='canyon')] | Done. | Done.\"" in out  # the tool result and user turn left out
    assert "mv(source=" in out  # the reference: each turn's ground-truth calls
    assert "... 1 more mismatches in eval_predictions.jsonl" in out  # the right episode is not a mismatch
