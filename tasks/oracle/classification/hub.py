"""The hub-based classification datasets (SST-2, MD Gender, SNLI): fetched with ``datasets.load_dataset`` on
first use, offline at once when the environment says so."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ao_calib.core.errors import DataValidationError
from ao_calib.runtime.offline import env_flag

from .catalog import ClassificationDataUnavailable, HubLoader
from .reading import Asker, balanced_flags, pick_labelled, question_row, round_robin, shuffled


def _env_offline() -> bool:
    return env_flag("HF_HUB_OFFLINE") or env_flag("HF_DATASETS_OFFLINE")


def _default_hub_loader(hub_id: str, config: str | None) -> Any:
    """``datasets.load_dataset``, imported lazily. ``datasets`` reads HF_HUB_OFFLINE / HF_DATASETS_OFFLINE once,
    at import; if they were set after that, offline mode is switched on for this call, so an offline machine
    fails at once instead of after about 20 s of network retries per dataset."""
    import datasets  # lazy: only hub datasets need it
    import datasets.config as ds_config

    args = (hub_id, config) if config else (hub_id,)
    if not _env_offline() or ds_config.HF_HUB_OFFLINE:
        return datasets.load_dataset(*args)
    saved = ds_config.HF_HUB_OFFLINE
    ds_config.HF_HUB_OFFLINE = True
    try:
        return datasets.load_dataset(*args)
    finally:
        ds_config.HF_HUB_OFFLINE = saved


def call_hub(name: str, hub_id: str, config: str | None, hub_loader: HubLoader | None) -> Any:
    what = hub_id + (f" (config {config})" if config else "")
    try:
        return (hub_loader or _default_hub_loader)(hub_id, config)
    except ClassificationDataUnavailable:
        raise
    except Exception as exc:  # ConnectionError offline, DatasetNotFoundError, ImportError, script datasets, ...
        reason = f"{type(exc).__name__}: {exc}".strip()
        raise ClassificationDataUnavailable(
            f"classification dataset '{name}': hub dataset {what} could not be loaded: {reason}; offline?") from exc


def _splits(data: Any, splits: Sequence[str], hub_id: str) -> list[tuple[str, Any]]:
    present = [(s, data[s]) for s in splits if s in data]
    if not present:
        raise ClassificationDataUnavailable(f"hub dataset {hub_id} has none of the splits {list(splits)}")
    return present


def _check_columns(split_data: Any, columns: Sequence[str], source: str) -> None:
    names = split_data.column_names if hasattr(split_data, "column_names") else list(split_data)
    for column in columns:
        if column not in names:
            raise DataValidationError(source, 0, column, f"missing column (the columns are {list(names)})")


def _cell(split_data: Any, column: str, index: int) -> Any:
    if hasattr(split_data, "column_names"):  # a datasets.Dataset: fetch one row, not a whole column
        return split_data[int(index)][column]
    return split_data[column][index]


def _hub_items(data: Any, splits: Sequence[str], hub_id: str, label_column: str, labels: Mapping[Any, str],
               text_columns: Sequence[str]) -> list[tuple[str, Any, int]]:
    """(class, split data, index) for rows whose label is in ``labels``; checks the text columns exist."""
    items = []
    for split, split_data in _splits(data, splits, hub_id):
        _check_columns(split_data, (label_column, *text_columns), f"hub:{hub_id}[{split}]")
        for index, label in enumerate(split_data[label_column]):
            if label in labels:
                items.append((labels[label], split_data, index))
    return items


def _text(split_data: Any, column: str, index: int) -> str | None:
    value = _cell(split_data, column, index)
    return value.strip() if isinstance(value, str) and value.strip() else None


def _sst2(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
         ask: Asker) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "label", {0: "negative", 1: "positive"}, ("sentence",))
    picked = [(label, text) for label, d, i in round_robin(rng, items, n, key=lambda item: item[0])
              if (text := _text(d, "sentence", i))]
    rows = []
    for (label, text), yes in zip(picked, balanced_flags(rng, len(picked))):
        asked = label if yes else ("negative" if label == "positive" else "positive")
        rows.append(question_row("sst2", text, ask(asked), yes))
    return shuffled(rng, rows)


def _md_gender(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
              ask: Asker) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "gender", {1: "female", 2: "male"}, ("text", "title"))
    picked = []
    for label, d, i in round_robin(rng, items, n, key=lambda item: item[0]):
        text, entity = _text(d, "text", i), _text(d, "title", i)
        if text and entity:
            picked.append((label, f"{text}\n\nThis text is about {entity}."))
    rows = []
    for (label, context), yes in zip(picked, balanced_flags(rng, len(picked))):
        asked = label if yes else ("male" if label == "female" else "female")
        rows.append(question_row("md_gender", context, ask(fill=asked), yes))
    return shuffled(rng, rows)


def _snli(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
         ask: Asker) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "label", {0: "entailment", 2: "contradiction"},
                       ("premise", "hypothesis"))
    yes_items = [x for x in items if x[0] == "entailment"]
    no_items = [x for x in items if x[0] == "contradiction"]
    yes, no = pick_labelled(rng, yes_items, no_items, n)
    rows = []
    for group, answer in ((yes, True), (no, False)):
        for _, d, i in group:
            premise, hypothesis = _text(d, "premise", i), _text(d, "hypothesis", i)
            if premise and hypothesis:
                question, group = ask()
                rows.append(question_row("snli", premise, (f"{question} {hypothesis}", group), answer))
    return shuffled(rng, rows)


HUB_BUILDERS: dict[str, Callable[[Any, Sequence[str], str, int, random.Random, Asker], list[dict]]] = {
    "sst2": _sst2,
    "md_gender": _md_gender,
    "snli": _snli,
}
