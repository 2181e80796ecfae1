"""Where the oracle's data rows come from (``task.data``): WildChat, a labelled file, the classification files or
the generator, as training rows, the run's own held-out split and a validation split."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ao_calib.core.errors import AOCalibError

from ..classification.source import classification_splits
from ..classification.source import summary as classification_summary
from ..config import OracleDataConfig
from .files import load_labelled_rows, load_wildchat
from .generate import generate_splits_for
from .oracle import wildchat_split

log = logging.getLogger(__name__)


@dataclass
class SourceRows:
    """The data source's rows (prompt, question, answer): ``test`` is the run's own held-out split (None with
    ``task.data.train_path``, whose held-out rows are ``task.data.test_path``'s); ``validation`` the split the
    baselines fit on ([] when the source has none)."""

    train: list[dict]
    test: list[dict] | None
    validation: list[dict] = field(default_factory=list)


def source_rows(data: OracleDataConfig, data_seed: int, classification_seed: int) -> SourceRows:
    """The rows of ``task.data``'s source, answers withheld when ``task.data.withhold_answers`` says so."""
    validation: list[dict] = []
    if data.path:
        train, test = wildchat_split(load_wildchat(data.path, strict=data.strict).to_list(), data.test_fraction)
    elif data.train_path:
        train, test = load_labelled_rows(data.train_path, "the training file (task.data.train_path)"), None
    elif data.classification.enabled:
        splits = classification_splits(data.classification, classification_seed)
        log.info("oracle data (task.data.classification): %s", classification_summary(splits))
        train, validation = splits["train"], splits["validation"]
        test = splits["validation"] if data.eval_split == "validation" else splits["test"]
    else:
        splits = generate_splits_for(data.generate, data_seed)
        train, test = splits[0], splits[-1]
        validation = splits[1] if len(splits) == 3 else []
        if data.eval_split == "validation":
            test = splits[1]
            if not data.test_path:
                log.info("oracle data: evaluating on the validation split (%d rows); the test split is unused",
                         len(test))
    if data.withhold_answers:
        train = [{**r, "answer": None} for r in train]
    return SourceRows(train, test, validation)


def check_judge_only_setup(judge, stages) -> None:
    """Rows without reference answers (WildChat, or task.data.withhold_answers) are scored by a judge alone."""
    if judge is None or judge.name == "label":
        raise AOCalibError(f"task.data: these questions have no reference answers, so "
                           f"judge={'none' if judge is None else judge.name} cannot score them: use "
                           "judge=litellm (or judge=local)")
    if "sft" in stages:  # an SFT trainer or warm-up (the format warm-up is named "format")
        raise AOCalibError("task.data: these questions have no reference answers to imitate: use "
                           "warmup=format (the oracle's own answers, tagged) and an RL trainer, not SFT")
