"""Reference answers longer than the generation budget. A row whose expected output (the ``completion`` column a
task gives for its warm-up) needs more tokens than an evaluation's ``eval.max_new_tokens``, or than a rollout's
``trainer.max_completion_length``, can never be written in full: it is cut off and scored as malformed however good
the model is, which caps the held-out figures and pays RL for shorter, wrong answers. Counted at start-up, said
loudly, and kept as an alert in the run's summary and closing block."""

from __future__ import annotations

import logging

from ao_calib.runtime import distributed

log = logging.getLogger(__name__)

# Alert names in the summary (the closing block prints each with its message).
ALERT_NAMES = {"test": "references_over_eval_budget", "train": "references_over_rollout_budget"}
SPLIT_WORDS = {"test": "held-out", "train": "training"}


def completion_lengths(tokenizer, completions: list) -> list[int]:
    """Tokens of each string completion (the end-of-turn token not counted: an answer cut right after its last
    token is whole)."""
    return [len(tokenizer(c, add_special_tokens=False)["input_ids"]) for c in completions if isinstance(c, str)]


def references_over_budget(data, tokenizer, budgets: dict[str, tuple[str, int | None]]) -> dict[str, dict]:
    """``budgets``: split name (``train``/``test``) -> (the key that sets its budget, its value or None to skip).
    Returns an alert per split with references over its budget: ``{name: {step, message, over, rows, longest}}``."""
    alerts = {}
    for split_name, (key, limit) in budgets.items():
        split = getattr(data, split_name, None)
        if limit is None or split is None or "completion" not in split.column_names:
            continue
        lengths = completion_lengths(tokenizer, split["completion"])
        over = sum(n > limit for n in lengths)
        if not over:
            continue
        longest = max(lengths)
        message = (f"{over} of {len(lengths)} {SPLIT_WORDS[split_name]} references are longer than {key}={limit} "
                   f"tokens (longest {longest}): such rows are cut off and scored as malformed whatever the model "
                   f"writes; raise {key} to at least {longest}")
        log.warning(message)
        if distributed.is_main():
            print(f"[budget] {message}", flush=True)
        alerts[ALERT_NAMES[split_name]] = {"step": 0, "message": message, "over": over, "rows": len(lengths),
                                           "longest": longest}
    return alerts
