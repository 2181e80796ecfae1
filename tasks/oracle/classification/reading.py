"""Shared readers of the classification files: checked CSV/JSON rows and fields, the question paraphrases
(``Asker``), and the seeded draws that balance Yes/No and classes."""

from __future__ import annotations

import csv
import functools
import hashlib
import io
import json
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ao_calib.core.errors import DataValidationError, MissingDataFileError

from .catalog import (FILLED_GROUPS, NO, QUESTION_FILE, QUESTION_PREFIX, QUESTIONS, YES,
                                     ClassificationDataUnavailable, shipped_data_dir)


def load_paraphrases(path: str | Path) -> dict:
    """The question paraphrases of a ``paraphrases/question.json``: {group: [text, ...] or {label: [text, ...]}}.
    Only the top level is checked here; each group's shape is checked where it is used."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataFileError(f"the question paraphrase file {path} does not exist")
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataValidationError(str(path), 0, None, "the file must hold a JSON object of paraphrase groups")
    return data


def question_row(name: str, context: str, asked: tuple[str, str], yes: bool, statement: Statement | None = None
                 ) -> dict:
    """A yes/no row about ``context``; with its ``statement``'s classes, the fields its open question and its
    controls read (``Statement.fields``)."""
    question, group = asked
    row = {"dataset": name, "prompt": context, "question": QUESTION_PREFIX + question, "answer": YES if yes else NO,
           "question_group": group}
    return row if statement is None else {**row, **statement.fields(context)}


@dataclass(frozen=True)
class Statement:
    """What a file says of one statement beyond its yes/no row: ``label``, its class (true/false where the
    statement itself is true or false); ``asked``, the class its yes/no question asks about; ``fact``, the answer to
    its open question (the class in ``CLASS_WORDS``' words, or what the statement names); ``open_questions``, the
    wordings of that question; ``subset``, the file or group it comes from where a dataset pools several."""

    label: str
    asked: str
    fact: str
    open_questions: tuple[str, ...]
    subset: str | None = None

    def fields(self, context: str) -> dict:
        # one wording per statement, by its text: the same statement is asked the same way in every run
        pick = int(hashlib.sha1(context.encode()).hexdigest()[:8], 16) % len(self.open_questions)
        return {"label": self.label, "asked": self.asked, "fact": self.fact,
                "open_question": self.open_questions[pick], **({"subset": self.subset} if self.subset else {})}


class Asker:
    """Question texts of one paraphrase group: always its first paraphrase, or (given ``rng``) one drawn from all
    of them per question. Called as ``ask(label, fill)``: ``label`` picks the sub-group of a labelled group (sst2,
    singular_plural, the Engels probes), ``fill`` replaces the "{}"; it returns (question, question group)."""

    def __init__(self, group: str, paraphrases: list[str] | dict[str, list[str]], rng: random.Random | None):
        self.group, self.paraphrases, self.rng = group, paraphrases, rng

    def __call__(self, label: str | None = None, fill: str | None = None) -> tuple[str, str]:
        texts, group = self.paraphrases, self.group
        if isinstance(texts, dict):
            texts, group = texts[label], f"{group}/{label}"
        text = texts[0] if self.rng is None else self.rng.choice(texts)
        return (text if fill is None else text.replace("{}", fill, 1)), group


def asker(name: str, seed: int | str, question_file: Path | None) -> Asker:
    """The questions of dataset ``name``: ``QUESTIONS`` (the first paraphrases) when ``question_file`` is None,
    else every paraphrase of its group in that file, drawn by an RNG of their own (so the rows do not change)."""
    default = QUESTIONS[name]
    if question_file is None:
        texts = {k: [v] for k, v in default.items()} if isinstance(default, dict) else [default]
        return Asker(name, texts, None)
    labels = tuple(default) if isinstance(default, dict) else None
    texts = paraphrase_group(question_file, load_paraphrases(question_file), (name,), labels, name in FILLED_GROUPS)
    return Asker(name, texts, random.Random(f"ao_classification:{name}:{seed}:paraphrases"))


def paraphrase_group(path: Path, paraphrases: Mapping, keys: tuple[str, ...], labels: tuple[str, ...] | None,
                      filled: bool) -> list[str] | dict[str, list[str]]:
    """The group at ``keys`` of a question.json, checked: a non-empty list of strings (each with one "{}" when
    ``filled``), or with ``labels`` an object holding such a list per label."""
    node: Any = paraphrases
    for depth, key in enumerate(keys):
        if not isinstance(node, Mapping) or key not in node:
            raise DataValidationError(str(path), 0, "/".join(keys[:depth + 1]), "missing paraphrase group")
        node = node[key]
    field = "/".join(keys)
    if labels is None:
        return _paraphrase_list(path, node, field, filled)
    if not isinstance(node, Mapping):
        raise DataValidationError(str(path), 0, field, f"must be an object with the sub-groups {list(labels)}")
    for label in labels:
        if label not in node:
            raise DataValidationError(str(path), 0, f"{field}/{label}", "missing paraphrase group")
    return {label: _paraphrase_list(path, node[label], f"{field}/{label}", filled) for label in labels}


def _paraphrase_list(path: Path, texts: Any, field: str, filled: bool) -> list[str]:
    if not isinstance(texts, list) or not texts:
        raise DataValidationError(str(path), 0, field, "must be a non-empty list of question strings")
    for index, text in enumerate(texts):
        if not isinstance(text, str) or not text.strip():
            raise DataValidationError(str(path), index, field, f"must be a non-empty string, got {text!r}")
        if filled and text.count("{}") != 1:
            raise DataValidationError(str(path), index, field, f"must hold one '{{}}' for the label, got {text!r}")
    return [text.strip() for text in texts]


def asked_in(question: str, templates: Sequence[str]) -> str:
    """What fills the "{}" of the paraphrase ``question`` is worded in (the class a tense question asks about), by
    the most specific template that fits (the shortest fill); "" where none fits. Read from the wording, not found
    in it: "Is the narrative presented in the future tense?" asks about the future."""
    text = question.removeprefix(QUESTION_PREFIX).strip()
    fills = []
    for template in templates:
        head, _, tail = template.partition("{}")
        if text.startswith(head) and text.endswith(tail) and len(text) > len(head) + len(tail):
            fills.append(text[len(head):len(text) - len(tail)])
    return min(fills, key=len, default="")


@functools.cache
def shipped_paraphrases() -> dict:
    """The shipped ``paraphrases/question.json``, read once."""
    return load_paraphrases(question_file_in(None))


def question_file_in(data_dir: str | Path | None) -> Path:
    return (Path(data_dir) if data_dir is not None else shipped_data_dir()) / QUESTION_FILE


def nearest_question_file(path: Path) -> Path:
    """paraphrases/question.json in the file's folder or up to three folders above it, else the shipped one."""
    for folder in list(path.resolve().parents)[:4]:
        if (folder / QUESTION_FILE).is_file():
            return folder / QUESTION_FILE
    return question_file_in(None)


def balanced_flags(rng: random.Random, count: int) -> list[bool]:
    """``count`` answers, half True; the odd one drawn at random; shuffled."""
    n_yes = count // 2 + (count % 2 if rng.random() < 0.5 else 0)
    flags = [True] * n_yes + [False] * (count - n_yes)
    rng.shuffle(flags)
    return flags


def balanced_asks(rng: random.Random, labels: Sequence[str], classes: Sequence[str]) -> list[tuple[bool, str]]:
    """(Yes?, the class asked about) for statements of ``labels``, so that every class is asked about as often with
    Yes (a statement of it) as with No (a statement of another): each statement goes where it evens the counts most
    (a Yes row if its own class lags further in Yes rows than any other class leads, else a No row about the class
    that leads most); a tie goes to the answer that has had fewer rows, then to a coin. The question alone then
    tells nothing of its answer."""
    lead = dict.fromkeys(classes, 0)  # Yes rows minus No rows asking about each class
    out = []
    for label in labels:
        others = [c for c in classes if c != label]
        top = max(lead[c] for c in others)
        total = sum(lead.values())
        if -lead[label] > top or (-lead[label] == top and (total < 0 or (total == 0 and rng.random() < 0.5))):
            lead[label] += 1
            out.append((True, label))
        else:
            asked = rng.choice([c for c in others if lead[c] == top])
            lead[asked] -= 1
            out.append((False, asked))
    return out


def round_robin(rng: random.Random, items: Sequence, k: int, key: Callable[[Any], str]) -> list:
    """Up to ``k`` items, drawn without replacement round-robin across the groups given by ``key`` (groups
    visited in a random order, items within each group shuffled), so groups are as even as the data allows."""
    groups: dict[str, list] = {}
    for item in items:
        groups.setdefault(key(item), []).append(item)
    order = sorted(groups)
    for g in order:
        rng.shuffle(groups[g])
    rng.shuffle(order)
    picked: list = []
    depth = 0
    while len(picked) < k and any(depth < len(groups[g]) for g in order):
        for g in order:
            if depth < len(groups[g]) and len(picked) < k:
                picked.append(groups[g][depth])
        depth += 1
    return picked


def pick_labelled(rng: random.Random, yes_items: Sequence, no_items: Sequence, n: int,
                   key: Callable[[Any], str] = lambda _: "") -> tuple[list, list]:
    """For datasets whose answer is fixed by the data: half Yes, half No (the other side fills a shortfall)."""
    want_yes = n // 2 + (n % 2 if rng.random() < 0.5 else 0)
    n_yes = min(want_yes, len(yes_items))
    n_no = min(n - n_yes, len(no_items))
    n_yes = min(n - n_no, len(yes_items))
    return round_robin(rng, yes_items, n_yes, key), round_robin(rng, no_items, n_no, key)


def shuffled(rng: random.Random, rows: list[dict]) -> list[dict]:
    rng.shuffle(rows)
    return rows


def require_file(name: str, path: Path) -> Path:
    if not path.is_file():
        raise ClassificationDataUnavailable(f"classification dataset '{name}': missing file {path}")
    return path


def read_csv(path: Path, required: Sequence[str], text: str | None = None) -> list[dict[str, str]]:
    """Rows of a CSV file as dicts, after checking that every required column is there and filled."""
    if text is None:
        try:
            text = path.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DataValidationError(str(path), 0, None, f"file is not UTF-8 ({exc.reason} at byte {exc.start})")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    header = reader.fieldnames
    if not header:
        raise DataValidationError(str(path), 0, None, "empty file: no header row")
    for column in required:
        if column not in header:
            raise DataValidationError(str(path), 0, column, f"missing column (the header is {list(header)})")
    rows = []
    for index, row in enumerate(reader):
        if row.get(None):
            raise DataValidationError(str(path), index, None,
                                      f"more fields than the header (an unquoted comma?) on file line "
                                      f"{reader.line_num}")
        for column in required:
            if row.get(column) is None:
                raise DataValidationError(str(path), index, column,
                                          f"missing value (fewer fields than the header) on file line "
                                          f"{reader.line_num}")
        rows.append(row)
    return rows


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DataValidationError(str(path), 0, None, f"file is not UTF-8 ({exc.reason} at byte {exc.start})")
    except json.JSONDecodeError as exc:
        raise DataValidationError(str(path), 0, None,
                                  f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def nonempty(path: Path, index: int, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataValidationError(str(path), index, field, f"must be a non-empty string, got {value!r}")
    return value.strip()


def choice_of(path: Path, index: int, field: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    key = value.strip() if isinstance(value, str) else value
    if key not in allowed:
        raise DataValidationError(str(path), index, field, f"must be one of {allowed}, got {value!r}")
    return key
