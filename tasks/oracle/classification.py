"""Yes/no classification evaluation sets for Activation Oracles (paper arXiv 2512.15674).

Builds the nine classification datasets that the Activation Oracles reference repository
(adamkarvonen/activation_oracles) evaluates on, as rows::

    {"dataset": name, "prompt": context, "question": "Answer with 'Yes' or 'No' only. " + question,
     "answer": "Yes" | "No"}

``prompt`` is the text whose activations the oracle reads; ``question`` is asked of the oracle.

Two kinds of source:

* file-based (``FILE_DATASETS``): read from a local copy of the reference repo's
  ``datasets/classification_datasets`` directory (``data_dir``), laid out as in ``DATA_FILES``;
* hub-based (``HUB_DATASETS``): fetched with ``datasets.load_dataset`` on first use (lazily imported). They need
  the Hugging Face hub or a warm local cache; offline they raise ``ClassificationDataUnavailable`` quickly.

Choices, all deterministic for a given ``seed`` (each dataset has its own RNG, seeded by name and seed, so a
dataset's rows do not depend on which other datasets are loaded with it):

* Questions use the FIRST paraphrase of each dataset group in the reference ``paraphrases/question.json``
  (see ``QUESTIONS``), rather than a random paraphrase, so the same label is always asked the same way.
* Yes/No are balanced: ``n // 2`` of each, the odd one drawn by the RNG; if one side runs short the other fills
  up to ``n``. Where the context has a class (sentiment, gender, tense, topic, number, sub-file), contexts are
  also drawn round-robin across classes, so no class dominates.
* ``n`` caps the rows; a dataset with fewer usable examples returns what it has.
* File rows are all validated (not just the sampled ones); a malformed one raises
  ``DataValidationError(file, row, field, reason)``, ``row`` being the 0-based data row (CSV header not counted)
  or list index (JSON). Hub rows with labels outside the mapping (e.g. SNLI's -1 "no gold label") are skipped.

Deliberate differences from the reference loaders:

* relations: the wrong object for a No row is never an object that is true for the same subject elsewhere in the
  file (the real files list some subjects twice with different true objects), and files are read in sorted path
  order, not ``os.listdir`` order.
* ner: consecutive ``B-`` tags start separate entities (the reference drops the second), a trailing entity at
  the end of a sentence is counted, and a No entity never appears (case-insensitively, as a whole word) in the
  sentence text. Encoding: strict UTF-8 first, then ``unicode_escape`` (what the reference uses; it decodes
  the Kaggle NER corpus, which is latin-1 with no escapes), then latin-1 (never fails). UTF-8 comes first
  because ``unicode_escape`` silently turns UTF-8 multi-byte characters into mojibake.
"""

from __future__ import annotations

import csv
import io
import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ao_calib.errors import AOCalibError, DataValidationError
from ao_calib.offline import env_flag

DATASETS: tuple[str, ...] = (
    "geometry_of_truth", "relations", "sst2", "md_gender", "snli", "ag_news", "ner", "tense", "singular_plural",
)
FILE_DATASETS: tuple[str, ...] = ("geometry_of_truth", "relations", "ag_news", "ner", "tense", "singular_plural")
HUB_DATASETS: tuple[str, ...] = ("sst2", "md_gender", "snli")

QUESTION_PREFIX = "Answer with 'Yes' or 'No' only. "
YES, NO = "Yes", "No"

# Paths relative to data_dir. relations is every relations/<type>/<name>.json, in sorted order.
GMT_FILES: tuple[str, ...] = tuple(
    f"gmt/{stem}.csv" for stem in ("sp_en_trans", "cities", "smaller_than", "larger_than", "companies_true_false")
)
DATA_FILES: dict[str, tuple[str, ...]] = {
    "geometry_of_truth": GMT_FILES,
    "relations": ("relations/*/*.json",),
    "ag_news": ("ag_news/ag_news.csv",),
    "ner": ("ner/ner.csv",),
    "tense": ("tense/tense_processed.json",),
    "singular_plural": ("singular_plural/singular_plural.csv",),
}

# name -> (hub id, config name or None, splits used). The column names and label codes below are the ones the
# reference loaders read; they are UNVERIFIED OFFLINE (the hub was unreachable when this was written):
#   stanfordnlp/sst2: sentence (str), label (0 negative, 1 positive; the test split is unlabelled, -1), so
#     train + validation are used.
#   facebook/md_gender_bias, config funpedia: text, title (the entity the text is about), persona, gender
#     (0 gender-neutral, 1 female, 2 male); neutral rows are dropped. All three splits are used. The reference
#     loaded it with trust_remote_code=True; datasets>=4 no longer runs loading scripts, so if the hub copy is
#     script-only this dataset is reported as unavailable.
#   stanfordnlp/snli, train: premise, hypothesis, label (0 entailment, 1 neutral, 2 contradiction, -1 no gold
#     label); only 0 and 2 are used.
HUB_SOURCES: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "sst2": ("stanfordnlp/sst2", None, ("train", "validation")),
    "md_gender": ("facebook/md_gender_bias", "funpedia", ("train", "validation", "test")),
    "snli": ("stanfordnlp/snli", None, ("train",)),
}

# The first paraphrase of each group in the reference paraphrases/question.json ("{}" is filled in).
QUESTIONS: dict[str, Any] = {
    "geometry_of_truth": "Is this statement true?",
    "relations": "Is this statement true?",
    "sst2": {"positive": "Is this a positive review?", "negative": "Is this a negative review?"},
    "md_gender": "Is this sentence about a {} person?",
    "snli": "Is the next sentence logically consistent with what came before?",  # + " " + hypothesis
    "ag_news": "Would you say this piece focuses on {}?",
    "ner": "Does this text mention {}?",
    "tense": "Is this statement in the {} tense?",
    "singular_plural": {
        "single": "Would you say this sentence mentions a single person?",
        "multiple": "Would you say this sentence mentions multiple people?",
    },
}

# AG News "Class Index" -> the topic wording the reference puts in its questions.
AG_NEWS_TOPICS: dict[str, str] = {"1": "World News", "2": "Sports", "3": "Business", "4": "Science/Technology"}
TENSES: tuple[str, ...] = ("past", "present", "future")
NUMBERS: tuple[str, ...] = ("single", "multiple")
GMT_LABELS: dict[str, bool] = {"1": True, "0": False}

HubLoader = Callable[[str, "str | None"], Any]


class ClassificationDataUnavailable(AOCalibError):
    """A classification dataset cannot be loaded here: a file is missing, or the hub cannot be reached."""


# ---------------------------------------------------------------------------------------------- public API


def load_classification(name: str, data_dir: str | Path | None, n: int = 250, seed: int = 0, *,
                        hub_loader: HubLoader | None = None) -> list[dict]:
    """Up to ``n`` rows of dataset ``name``, balanced Yes/No where possible, deterministic for ``seed``.

    File-based datasets read from ``data_dir``; hub-based ones call ``hub_loader(hub_id, config)``, by default
    ``datasets.load_dataset``. It must return a mapping of split name to either a ``datasets.Dataset`` or a dict
    of column name -> list. Raises ``ClassificationDataUnavailable`` when the data is not there and
    ``DataValidationError`` when a file row is malformed."""
    if name not in DATASETS:
        raise AOCalibError(f"unknown classification dataset {name!r}; choose from {', '.join(DATASETS)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    rng = random.Random(f"ao_classification:{name}:{seed}")
    if name in HUB_DATASETS:
        hub_id, config, splits = HUB_SOURCES[name]
        data = _call_hub(name, hub_id, config, hub_loader)
        rows = _HUB_BUILDERS[name](data, splits, hub_id, n, rng)
    else:
        if data_dir is None:
            raise ClassificationDataUnavailable(
                f"classification dataset '{name}' is read from files ({', '.join(DATA_FILES[name])}) but no "
                "data_dir was given; point it at a copy of the reference repo's datasets/classification_datasets")
        rows = _FILE_BUILDERS[name](Path(data_dir), n, rng)
    if not rows and n > 0:
        raise ClassificationDataUnavailable(f"classification dataset '{name}' has no usable examples")
    return rows


def load_suite(names: Iterable[str] = DATASETS, data_dir: str | Path | None = None, n: int = 250, seed: int = 0,
               *, hub_loader: HubLoader | None = None) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Loads each dataset it can. Returns (rows per dataset, {skipped dataset: reason}).

    A dataset whose data is missing or unreachable is skipped with its reason; a malformed file
    (``DataValidationError``) or an unknown name still raises, since those need fixing rather than skipping."""
    names = list(names)
    unknown = [x for x in names if x not in DATASETS]
    if unknown:
        raise AOCalibError(f"unknown classification dataset(s) {unknown}; choose from {', '.join(DATASETS)}")
    loaded: dict[str, list[dict]] = {}
    skipped: dict[str, str] = {}
    for name in dict.fromkeys(names):
        try:
            loaded[name] = load_classification(name, data_dir, n=n, seed=seed, hub_loader=hub_loader)
        except ClassificationDataUnavailable as exc:
            skipped[name] = str(exc)
    return loaded, skipped


# ----------------------------------------------------------------------------------------- shared helpers


def _row(name: str, context: str, question: str, yes: bool) -> dict:
    return {"dataset": name, "prompt": context, "question": QUESTION_PREFIX + question, "answer": YES if yes else NO}


def _balanced_flags(rng: random.Random, count: int) -> list[bool]:
    """``count`` answers, half True; the odd one drawn at random; shuffled."""
    n_yes = count // 2 + (count % 2 if rng.random() < 0.5 else 0)
    flags = [True] * n_yes + [False] * (count - n_yes)
    rng.shuffle(flags)
    return flags


def _round_robin(rng: random.Random, items: Sequence, k: int, key: Callable[[Any], str]) -> list:
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


def _pick_labelled(rng: random.Random, yes_items: Sequence, no_items: Sequence, n: int,
                   key: Callable[[Any], str] = lambda _: "") -> tuple[list, list]:
    """For datasets whose answer is fixed by the data: half Yes, half No (the other side fills a shortfall)."""
    want_yes = n // 2 + (n % 2 if rng.random() < 0.5 else 0)
    n_yes = min(want_yes, len(yes_items))
    n_no = min(n - n_yes, len(no_items))
    n_yes = min(n - n_no, len(yes_items))
    return _round_robin(rng, yes_items, n_yes, key), _round_robin(rng, no_items, n_no, key)


def _finish(rng: random.Random, rows: list[dict]) -> list[dict]:
    rng.shuffle(rows)
    return rows


def _require_file(name: str, path: Path) -> Path:
    if not path.is_file():
        raise ClassificationDataUnavailable(f"classification dataset '{name}': missing file {path}")
    return path


def _read_csv(path: Path, required: Sequence[str], text: str | None = None) -> list[dict[str, str]]:
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


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise DataValidationError(str(path), 0, None, f"file is not UTF-8 ({exc.reason} at byte {exc.start})")
    except json.JSONDecodeError as exc:
        raise DataValidationError(str(path), 0, None,
                                  f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None


def _nonempty(path: Path, index: int, field: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise DataValidationError(str(path), index, field, f"must be a non-empty string, got {value!r}")
    return value.strip()


def _choice(path: Path, index: int, field: str, value: Any, allowed: Iterable[str]) -> str:
    allowed = list(allowed)
    key = value.strip() if isinstance(value, str) else value
    if key not in allowed:
        raise DataValidationError(str(path), index, field, f"must be one of {allowed}, got {value!r}")
    return key


# ------------------------------------------------------------------------------------------- file datasets


def _geometry_of_truth(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    yes_items, no_items = [], []
    for rel in GMT_FILES:
        path = _require_file("geometry_of_truth", data_dir / rel)
        for index, row in enumerate(_read_csv(path, ("statement", "label"))):
            statement = _nonempty(path, index, "statement", row["statement"])
            label = GMT_LABELS[_choice(path, index, "label", row["label"], GMT_LABELS)]
            (yes_items if label else no_items).append((rel, statement))
    yes, no = _pick_labelled(rng, yes_items, no_items, n, key=lambda item: item[0])
    question = QUESTIONS["geometry_of_truth"]
    return _finish(rng, [_row("geometry_of_truth", s, question, True) for _, s in yes]
                   + [_row("geometry_of_truth", s, question, False) for _, s in no])


def _relations(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    root = data_dir / "relations"
    files = sorted(root.glob("*/*.json"), key=lambda p: p.relative_to(root).as_posix()) if root.is_dir() else []
    if not files:
        raise ClassificationDataUnavailable(
            f"classification dataset 'relations': no files matching {root}/<type>/<name>.json")
    yes_items, no_items = [], []
    for path in files:
        rel = path.relative_to(root).as_posix()
        data = _read_json(path)
        if not isinstance(data, dict):
            raise DataValidationError(str(path), 0, None, "the file must hold a JSON object")
        for key in ("prompt_templates", "samples"):
            if key not in data:
                raise DataValidationError(str(path), 0, key, "missing top-level key")
        templates = data["prompt_templates"]
        if not isinstance(templates, list) or not templates:
            raise DataValidationError(str(path), 0, "prompt_templates", "must be a non-empty list of strings")
        for j, template in enumerate(templates):
            if not isinstance(template, str) or "{}" not in template:
                raise DataValidationError(str(path), j, "prompt_templates",
                                          f"each template must be a string containing '{{}}', got {template!r}")
        samples = data["samples"]
        if not isinstance(samples, list):
            raise DataValidationError(str(path), 0, "samples", "must be a list of {subject, object} objects")
        pairs = []
        for index, sample in enumerate(samples):
            if not isinstance(sample, dict):
                raise DataValidationError(str(path), index, None, "each sample must be a JSON object")
            pairs.append((_nonempty(path, index, "subject", sample.get("subject")),
                          _nonempty(path, index, "object", sample.get("object"))))
        objects = sorted({obj for _, obj in pairs})
        true_for: dict[str, set[str]] = {}
        for subject, obj in pairs:
            true_for.setdefault(subject, set()).add(obj)
        for subject, obj in pairs:
            stem = templates[rng.randrange(len(templates))].strip().replace("{}", subject, 1)
            yes_items.append((rel, f"{stem} {obj}."))
            wrong = [o for o in objects if o not in true_for[subject]]
            if wrong:
                no_items.append((rel, f"{stem} {rng.choice(wrong)}."))
    yes, no = _pick_labelled(rng, yes_items, no_items, n, key=lambda item: item[0])
    question = QUESTIONS["relations"]
    return _finish(rng, [_row("relations", s, question, True) for _, s in yes]
                   + [_row("relations", s, question, False) for _, s in no])


def _ag_news(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    path = _require_file("ag_news", data_dir / "ag_news" / "ag_news.csv")
    items = []
    for index, row in enumerate(_read_csv(path, ("Class Index", "Title", "Description"))):
        label = _choice(path, index, "Class Index", row["Class Index"], AG_NEWS_TOPICS)
        title = _nonempty(path, index, "Title", row["Title"])
        description = _nonempty(path, index, "Description", row["Description"])
        items.append((label, f"{title}\n\n{description}"))
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, context), yes in zip(picked, _balanced_flags(rng, len(picked))):
        topic = label if yes else rng.choice([x for x in AG_NEWS_TOPICS if x != label])
        rows.append(_row("ag_news", context, QUESTIONS["ag_news"].format(AG_NEWS_TOPICS[topic]), yes))
    return _finish(rng, rows)


def _decode_ner(raw: bytes) -> str:
    for encoding in ("utf-8-sig", "unicode_escape", "latin-1"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes any bytes")  # pragma: no cover


_IOB = re.compile(r"^(O|[BI]-.+)$")


def _ner_sentences(path: Path) -> list[tuple[str, list[str]]]:
    """(sentence text, entities in order of appearance) for every sentence of a Kaggle-style IOB CSV."""
    rows = _read_csv(path, ("Sentence #", "Word", "Tag"), text=_decode_ner(path.read_bytes()))
    sentences: list[tuple[list[str], list[str]]] = []
    entity: list[str] = []

    def close_entity():
        if entity:
            sentences[-1][1].append(" ".join(entity))
            entity.clear()

    for index, row in enumerate(rows):
        tag = row["Tag"].strip()
        if not _IOB.match(tag):
            raise DataValidationError(str(path), index, "Tag", f"must be an IOB tag (O, B-x or I-x), got {tag!r}")
        word = row["Word"].strip()
        if not word:
            raise DataValidationError(str(path), index, "Word", "must be a non-empty string")
        if row["Sentence #"].strip():
            close_entity()
            sentences.append(([], []))
        elif not sentences:
            raise DataValidationError(str(path), index, "Sentence #",
                                      "the first row must start a sentence (e.g. 'Sentence: 1')")
        sentences[-1][0].append(word)
        if tag == "O" or tag.startswith("B-"):
            close_entity()
        if tag != "O":
            entity.append(word)  # B- starts an entity; I- continues one (or starts one after O)
    close_entity()
    return [(" ".join(words), entities) for words, entities in sentences]


def _mentions(text: str, entity: str) -> bool:
    return re.search(r"(?<!\w)" + re.escape(entity) + r"(?!\w)", text, flags=re.IGNORECASE) is not None


def _ner(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    path = _require_file("ner", data_dir / "ner" / "ner.csv")
    sentences = [(text, ents) for text, ents in _ner_sentences(path) if ents]
    all_entities = sorted({e for _, ents in sentences for e in ents})
    picked = _round_robin(rng, sentences, n, key=lambda _: "")
    rows = []
    for (text, entities), yes in zip(picked, _balanced_flags(rng, len(picked))):
        if not yes:
            entity = None
            for _ in range(20):  # rejection sampling, then an exhaustive fallback
                candidate = rng.choice(all_entities)
                if candidate not in entities and not _mentions(text, candidate):
                    entity = candidate
                    break
            if entity is None:
                others = [e for e in all_entities if e not in entities and not _mentions(text, e)]
                entity = rng.choice(others) if others else None
            if entity is None:
                yes = True  # no entity is absent from this sentence: ask about one that is there
        if yes:
            entity = rng.choice(sorted(set(entities)))
        rows.append(_row("ner", text, QUESTIONS["ner"].format(entity), yes))
    return _finish(rng, rows)


def _tense(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    path = _require_file("tense", data_dir / "tense" / "tense_processed.json")
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataValidationError(str(path), 0, None, "the file must hold a JSON list of {sentence, label}")
    items = []
    for index, example in enumerate(data):
        if not isinstance(example, dict):
            raise DataValidationError(str(path), index, None, "each example must be a JSON object")
        sentence = _nonempty(path, index, "sentence", example.get("sentence"))
        items.append((_choice(path, index, "label", example.get("label"), TENSES), sentence))
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, sentence), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else rng.choice([t for t in TENSES if t != label])
        rows.append(_row("tense", sentence, QUESTIONS["tense"].format(asked), yes))
    return _finish(rng, rows)


def _singular_plural(data_dir: Path, n: int, rng: random.Random) -> list[dict]:
    path = _require_file("singular_plural", data_dir / "singular_plural" / "singular_plural.csv")
    items = []
    for index, row in enumerate(_read_csv(path, ("sentence", "n_subjects"))):
        sentence = _nonempty(path, index, "sentence", row["sentence"])
        items.append((_choice(path, index, "n_subjects", row["n_subjects"], NUMBERS), sentence))
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, sentence), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else next(x for x in NUMBERS if x != label)
        rows.append(_row("singular_plural", sentence, QUESTIONS["singular_plural"][asked], yes))
    return _finish(rng, rows)


_FILE_BUILDERS: dict[str, Callable[[Path, int, random.Random], list[dict]]] = {
    "geometry_of_truth": _geometry_of_truth,
    "relations": _relations,
    "ag_news": _ag_news,
    "ner": _ner,
    "tense": _tense,
    "singular_plural": _singular_plural,
}


# -------------------------------------------------------------------------------------------- hub datasets


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


def _call_hub(name: str, hub_id: str, config: str | None, hub_loader: HubLoader | None) -> Any:
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


def _sst2(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "label", {0: "negative", 1: "positive"}, ("sentence",))
    picked = [(label, text) for label, d, i in _round_robin(rng, items, n, key=lambda item: item[0])
              if (text := _text(d, "sentence", i))]
    rows = []
    for (label, text), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else ("negative" if label == "positive" else "positive")
        rows.append(_row("sst2", text, QUESTIONS["sst2"][asked], yes))
    return _finish(rng, rows)


def _md_gender(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "gender", {1: "female", 2: "male"}, ("text", "title"))
    picked = []
    for label, d, i in _round_robin(rng, items, n, key=lambda item: item[0]):
        text, entity = _text(d, "text", i), _text(d, "title", i)
        if text and entity:
            picked.append((label, f"{text}\n\nThis text is about {entity}."))
    rows = []
    for (label, context), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else ("male" if label == "female" else "female")
        rows.append(_row("md_gender", context, QUESTIONS["md_gender"].format(asked), yes))
    return _finish(rng, rows)


def _snli(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "label", {0: "entailment", 2: "contradiction"},
                       ("premise", "hypothesis"))
    yes_items = [x for x in items if x[0] == "entailment"]
    no_items = [x for x in items if x[0] == "contradiction"]
    yes, no = _pick_labelled(rng, yes_items, no_items, n)
    rows = []
    for group, answer in ((yes, True), (no, False)):
        for _, d, i in group:
            premise, hypothesis = _text(d, "premise", i), _text(d, "hypothesis", i)
            if premise and hypothesis:
                rows.append(_row("snli", premise, f"{QUESTIONS['snli']} {hypothesis}", answer))
    return _finish(rng, rows)


_HUB_BUILDERS: dict[str, Callable[[Any, Sequence[str], str, int, random.Random], list[dict]]] = {
    "sst2": _sst2,
    "md_gender": _md_gender,
    "snli": _snli,
}
