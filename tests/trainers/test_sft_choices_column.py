"""The warm-up's tokenised rows where only rows after the first Arrow batch name the answers their label was drawn
from (warmup.calibration_expected_over_draw, as when coin-flip copies are appended after every readable row)."""

from __future__ import annotations


def test_choices_named_only_after_the_first_thousand_rows_are_kept(tiny_tokenizer):
    import datasets

    from ao_calib.trainers import calibration_loss
    from ao_calib.trainers.sft import tokenize_pairs

    rows = [{"prompt": [{"role": "user", "content": f"Is text {i} about music?"}],
             "completion": "[epistemic status: 60] Yes", "answer_drawn_from": ["Yes", "No"] if i >= 1000 else []}
            for i in range(1003)]
    encoded = tokenize_pairs(datasets.Dataset.from_list(rows), tiny_tokenizer, {"enable_thinking": False}, 512,
                             confidence_loss="calibration", expected_over_draw=True)
    choices = encoded[calibration_loss.CHOICES]
    assert all(c == [] for c in choices[:1000])
    yes, no = (tiny_tokenizer.encode(" " + a, add_special_tokens=False) for a in ("Yes", "No"))
    assert all(c == [yes[0], no[0]] for c in choices[1000:]), choices[1000:]
