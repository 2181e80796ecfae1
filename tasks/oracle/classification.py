"""Yes/no classification evaluation sets for Activation Oracles (paper arXiv 2512.15674).

Builds the nine classification datasets that the Activation Oracles reference repository
(adamkarvonen/activation_oracles) evaluates on, and its Engels probes (``ENGELS_DATASETS``), as rows::

    {"dataset": name, "prompt": context, "question": "Answer with 'Yes' or 'No' only. " + question,
     "answer": "Yes" | "No", "question_group": where in paraphrases/question.json the question comes from}

``prompt`` is the text whose activations the oracle reads; ``question`` is asked of the oracle.

Entry points: ``load_classification`` / ``load_suite`` (up to ``n`` balanced rows per dataset),
``load_labelled_file`` (every row of one file, whatever its layout), ``load_folder`` (every file of a folder such as
the shipped ``data/ao_classification``, found by ``shipped_data_dir``) and ``split_by_prompt`` (train / validation /
test rows with no statement in two splits, the Engels probes kept apart as out-of-distribution test rows).

Two kinds of source:

* file-based (``FILE_DATASETS``): read from a local copy of the reference repo's
  ``datasets/classification_datasets`` directory (``data_dir``), laid out as in ``DATA_FILES``;
* hub-based (``HUB_DATASETS``): fetched with ``datasets.load_dataset`` on first use (lazily imported). They need
  the Hugging Face hub or a warm local cache; offline they raise ``ClassificationDataUnavailable`` quickly.

Choices, all deterministic for a given ``seed`` (each dataset has its own RNG, seeded by name and seed, so a
dataset's rows do not depend on which other datasets are loaded with it):

* Questions use the FIRST paraphrase of each dataset group in the reference ``paraphrases/question.json``
  (see ``QUESTIONS``; the Engels groups are read from that file), rather than a random paraphrase, so the same
  label is always asked the same way. With ``all_paraphrases=True`` each question is drawn from every paraphrase
  of its group instead, by an RNG of its own, so the rows' prompts and answers are the same either way.
* Engels probes (``engels/<n>_<probe>.csv``, target 0/1 or True/False): the file name picks the probe's group
  in question.json's "engels" block (``ENGELS_PROBES``), whose two sub-groups hold the questions for target 1 and
  target 0; a Yes row asks its own class's question, a No row the other class's (as the reference does).
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

from ao_calib.core.errors import AOCalibError, DataValidationError, MissingDataFileError
from ao_calib.runtime.offline import env_flag

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

# Engels probe file name -> (its group in question.json's "engels" block, the label of target 1, of target 0). These
# are the reference's ten probes (data/ao_classification ships the first four); any other <n>_<probe>.csv whose
# lower-cased <probe> is a group there is read too, its two sub-groups in file order.
ENGELS_PROBES: dict[str, tuple[str, str, str]] = {
    "139_news_class_Politics.csv": ("news_class_politics", "politics", "not_politics"),
    "21_headline_istrump.csv": ("headline_istrump", "trump", "not_trump"),
    "59_wikidata_occupation_isjournalist.csv": ("wikidata_isjournalist", "journalist", "not_journalist"),
    "5_hist_fig_ismale.csv": ("hist_fig_ismale", "male", "female"),
    "22_headline_isobama.csv": ("headline_isobama", "obama", "not_obama"),
    "23_headline_ischina.csv": ("headline_ischina", "china", "not_china"),
    "60_wikidata_occupation_isathlete.csv": ("wikidata_isathlete", "athlete", "not_athlete"),
    "62_wikidata_occupation_ispolitician.csv": ("wikidata_ispolitician", "politician", "not_politician"),
    "63_wikidata_occupation_issinger.csv": ("wikidata_issinger", "singer", "not_singer"),
    "64_wikidata_occupation_isresearcher.csv": ("wikidata_isresearcher", "researcher", "not_researcher"),
}
ENGELS_PREFIX = "engels_"
# Dataset name ("engels_" + group) -> its file under data_dir/engels.
ENGELS_FILES: dict[str, str] = {ENGELS_PREFIX + group: file for file, (group, _, _) in ENGELS_PROBES.items()}
ENGELS_DATASETS: tuple[str, ...] = tuple(ENGELS_FILES)
ENGELS_TARGETS: dict[str, bool] = {"1": True, "0": False, "True": True, "False": False, "true": True,
                                   "false": False}

# Groups whose paraphrases hold a "{}" for the label asked about.
FILLED_GROUPS: frozenset[str] = frozenset({"md_gender", "ag_news", "ner", "tense"})
QUESTION_FILE = "paraphrases/question.json"

# The shipped copy of the data: data/ao_classification in the clone (see shipped_data_dir).
SHIPPED_DIR = Path("data") / "ao_classification"
DATA_DIR_KEY = "task.classification.data_dir"

SPLITS: tuple[str, ...] = ("train", "validation", "test")
OOD_SPLIT = "ood_test"

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
                        hub_loader: HubLoader | None = None, all_paraphrases: bool = False) -> list[dict]:
    """Up to ``n`` rows of dataset ``name`` (one of ``DATASETS`` or ``ENGELS_DATASETS``), balanced Yes/No where
    possible, deterministic for ``seed``.

    File-based datasets read from ``data_dir``; hub-based ones call ``hub_loader(hub_id, config)``, by default
    ``datasets.load_dataset``. It must return a mapping of split name to either a ``datasets.Dataset`` or a dict
    of column name -> list. ``all_paraphrases`` draws each question from all paraphrases of its group in
    ``data_dir/paraphrases/question.json`` (the shipped copy's when ``data_dir`` is None) instead of asking the
    first. Raises ``ClassificationDataUnavailable`` when the data is not there and ``DataValidationError`` when a
    file row is malformed."""
    if name not in DATASETS and name not in ENGELS_FILES:
        raise AOCalibError(f"unknown classification dataset {name!r}; choose from {', '.join(_KNOWN)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    rng = random.Random(f"ao_classification:{name}:{seed}")
    if name in HUB_DATASETS:
        ask = _asker(name, seed, _question_file(data_dir) if all_paraphrases else None)
        hub_id, config, splits = HUB_SOURCES[name]
        data = _call_hub(name, hub_id, config, hub_loader)
        rows = _HUB_BUILDERS[name](data, splits, hub_id, n, rng, ask)
    else:
        if data_dir is None:
            files = DATA_FILES.get(name) or (f"engels/{ENGELS_FILES.get(name)}",)
            raise ClassificationDataUnavailable(
                f"classification dataset '{name}' is read from files ({', '.join(files)}) but no "
                "data_dir was given; point it at a copy of the reference repo's datasets/classification_datasets")
        if name in ENGELS_FILES:
            path = _require_file(name, Path(data_dir) / "engels" / ENGELS_FILES[name])
            rows = _engels_file_rows(path, n, seed, all_paraphrases, _question_file(data_dir), rng)
        else:
            ask = _asker(name, seed, _question_file(data_dir) if all_paraphrases else None)
            rows = _FILE_BUILDERS[name](Path(data_dir), n, rng, ask)
    if not rows and n > 0:
        raise ClassificationDataUnavailable(f"classification dataset '{name}' has no usable examples")
    return rows


def load_suite(names: Iterable[str] = DATASETS, data_dir: str | Path | None = None, n: int = 250, seed: int = 0,
               *, hub_loader: HubLoader | None = None,
               all_paraphrases: bool = False) -> tuple[dict[str, list[dict]], dict[str, str]]:
    """Loads each dataset it can. Returns (rows per dataset, {skipped dataset: reason}).

    A dataset whose data is missing or unreachable is skipped with its reason; a malformed file
    (``DataValidationError``), a missing paraphrase file or an unknown name still raises, since those need fixing
    rather than skipping."""
    names = list(names)
    unknown = [x for x in names if x not in DATASETS and x not in ENGELS_FILES]
    if unknown:
        raise AOCalibError(f"unknown classification dataset(s) {unknown}; choose from {', '.join(_KNOWN)}")
    loaded: dict[str, list[dict]] = {}
    skipped: dict[str, str] = {}
    for name in dict.fromkeys(names):
        try:
            loaded[name] = load_classification(name, data_dir, n=n, seed=seed, hub_loader=hub_loader,
                                               all_paraphrases=all_paraphrases)
        except ClassificationDataUnavailable as exc:
            skipped[name] = str(exc)
    return loaded, skipped


def shipped_data_dir(setting_key: str = DATA_DIR_KEY) -> Path:
    """The classification files shipped with the clone, ``<clone>/data/ao_classification``.

    The folder is found from this module's place in the clone (``tasks/oracle/`` -> the clone's root), which holds
    for an editable install and for a run from the clone. A non-editable install copies only the package, not
    ``data/``: then this raises ``ClassificationDataUnavailable`` asking for ``setting_key`` to be set to the
    folder's path."""
    folder = Path(__file__).resolve().parents[2] / SHIPPED_DIR
    if not (folder / QUESTION_FILE).is_file():
        raise ClassificationDataUnavailable(
            f"the shipped classification data ({SHIPPED_DIR}) is not at {folder}: it is found from a clone of the "
            f"repository (an editable install or a run from the clone); set {setting_key} to a copy of it")
    return folder


def load_paraphrases(path: str | Path) -> dict:
    """The question paraphrases of a ``paraphrases/question.json``: {group: [text, ...] or {label: [text, ...]}}.
    Only the top level is checked here; each group's shape is checked where it is used."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataFileError(f"the question paraphrase file {path} does not exist")
    data = _read_json(path)
    if not isinstance(data, dict):
        raise DataValidationError(str(path), 0, None, "the file must hold a JSON object of paraphrase groups")
    return data


def detect_layout(path: str | Path) -> str:
    """Which of ``LAYOUTS`` a labelled file is in, from its suffix and its CSV header or JSON top level."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "labelled_jsonl"
    if suffix == ".json":
        data = _read_json(path)
        if isinstance(data, dict):
            return "relations"
        if isinstance(data, list):
            return "tense"
        raise DataValidationError(str(path), 0, None, "a .json data file must hold a relations object "
                                  "({prompt_templates, samples}) or a tense list of {sentence, label}")
    if suffix == ".csv":
        header = next(csv.reader(io.StringIO(_decode_ner(path.read_bytes()), newline="")), None) or []
        columns = {c.strip() for c in header}
        for layout, required in _CSV_LAYOUTS.items():
            if set(required) <= columns:
                return layout
        expected = "; ".join(f"{k}: {', '.join(v)}" for k, v in _CSV_LAYOUTS.items())
        raise DataValidationError(str(path), 0, None,
                                  f"unrecognised CSV layout: header {header} (expected the columns of {expected})")
    raise DataValidationError(str(path), 0, None,
                              f"unrecognised data file suffix {path.suffix!r} (expected .csv, .json or .jsonl)")


def load_labelled_file(path: str | Path, seed: int = 0, *, all_paraphrases: bool = False,
                       paraphrases_path: str | Path | None = None) -> list[dict]:
    """Every usable row of one labelled file, in any layout of ``LAYOUTS`` (see ``detect_layout``), as rows
    ``{"dataset", "prompt", "question", "answer", "question_group"}``; deterministic for ``seed`` and the file name.

    Per layout: a geometry-of-truth CSV gives one row per statement (its label is the answer); a relations JSON
    a Yes row per sample and a No row with a wrong object; tense, singular_plural, ag_news, ner and Engels files
    one row per context, Yes/No balanced; the project's labelled JSONL (``{"prompt", "question", "answer"}``) its
    rows as they are (extra fields kept; ``dataset`` defaults to the file's stem). Questions come from
    ``paraphrases_path``, by default the nearest ``paraphrases/question.json`` in the file's folder or above it,
    else the shipped copy's (only read for Engels files or with ``all_paraphrases``). A malformed row raises
    ``DataValidationError(file, row, field, reason)``."""
    path = Path(path)
    if not path.is_file():
        raise MissingDataFileError(f"the labelled data file {path} does not exist")
    layout = detect_layout(path)
    if layout == "labelled_jsonl":
        return _jsonl_rows(path)
    questions = Path(paraphrases_path) if paraphrases_path is not None else _nearest_question_file(path)
    if layout == "engels":
        dataset = ENGELS_PREFIX + _engels_probe(path, load_paraphrases(questions))[0]
        rng = random.Random(f"ao_classification:{dataset}:{seed}:{path.name}")
        return _engels_file_rows(path, None, seed, all_paraphrases, questions, rng)
    rng = random.Random(f"ao_classification:{layout}:{seed}:{path.name}")
    ask = _asker(layout, f"{seed}:{path.name}", questions if all_paraphrases else None)
    return _FILE_ROWS[layout](path, rng, ask)


def load_folder(data_dir: str | Path | None = None, seed: int = 0, *, all_paraphrases: bool = False) -> list[dict]:
    """``load_labelled_file`` on every .csv, .json and .jsonl file under ``data_dir`` (by default the shipped
    ``shipped_data_dir()``), in sorted path order, ``paraphrases/`` left out."""
    root = Path(data_dir) if data_dir is not None else shipped_data_dir()
    if not root.is_dir():
        raise MissingDataFileError(f"the classification data folder {root} does not exist")
    files = sorted((p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in (".csv", ".json", ".jsonl")
                    and "paraphrases" not in p.relative_to(root).parts),
                   key=lambda p: p.relative_to(root).as_posix())
    rows: list[dict] = []
    for path in files:
        rows += load_labelled_file(path, seed, all_paraphrases=all_paraphrases)
    return rows


def is_engels(dataset: str) -> bool:
    """Whether ``dataset`` is one of the Engels probes (out-of-distribution test rows in ``split_by_prompt``)."""
    return dataset.startswith(ENGELS_PREFIX)


def split_by_prompt(rows: Iterable[Mapping], fractions: Sequence[float] = (0.8, 0.1, 0.1), seed: int = 0, *,
                    ood: Callable[[str], bool] = is_engels, balance: bool = True) -> dict[str, list[dict]]:
    """Rows split into ``train``, ``validation`` and ``test`` per dataset by their statement (``prompt``), so no
    prompt is in two splits, plus ``ood_test``: every row of the datasets ``ood`` picks (the Engels probes by
    default), never in the other splits.

    Within each dataset the distinct prompts are grouped by the answers they carry (Yes, No, or both), and each
    group is shuffled (by ``seed`` and the dataset's name) and cut by ``fractions`` (train, validation, test; they
    must sum to 1), so the splits keep the dataset's Yes/No mix. A prompt found in several datasets keeps the
    split of the first dataset (by name) that has it; one that is also in an ``ood`` dataset goes to ``test``.
    ``balance`` then drops random rows of the larger answer in each dataset's split until Yes and No are even
    (where a split has both). Rows keep their input order within a split; the result does not depend on it."""
    fractions = _check_fractions(fractions)
    rows = [dict(r) for r in rows]
    for index, row in enumerate(rows):
        for field in ("dataset", "prompt", "answer"):
            if not isinstance(row.get(field), str):
                raise DataValidationError("split_by_prompt rows", index, field, "must be a string")
    by_dataset: dict[str, list[dict]] = {}
    for row in rows:
        by_dataset.setdefault(row["dataset"], []).append(row)
    ood_names = sorted(d for d in by_dataset if ood(d))
    split_of = {row["prompt"]: "test" for d in ood_names for row in by_dataset[d]}
    for dataset in sorted(set(by_dataset) - set(ood_names)):
        _assign_prompts(by_dataset[dataset], split_of, fractions, random.Random(f"ao_split:{dataset}:{seed}"))
    out: dict[str, list[dict]] = {split: [] for split in (*SPLITS, OOD_SPLIT)}
    for dataset in sorted(by_dataset):
        parts = ({OOD_SPLIT: by_dataset[dataset]} if dataset in ood_names
                 else {s: [r for r in by_dataset[dataset] if split_of[r["prompt"]] == s] for s in SPLITS})
        for split, part in parts.items():
            out[split] += _balanced(part, random.Random(f"ao_split_balance:{dataset}:{split}:{seed}")) \
                if balance else part
    order = {id(row): i for i, row in enumerate(rows)}
    return {split: sorted(part, key=lambda r: order[id(r)]) for split, part in out.items()}


# ----------------------------------------------------------------------------------------- shared helpers


def _row(name: str, context: str, asked: tuple[str, str], yes: bool) -> dict:
    question, group = asked
    return {"dataset": name, "prompt": context, "question": QUESTION_PREFIX + question, "answer": YES if yes else NO,
            "question_group": group}


class _Asker:
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


def _asker(name: str, seed: int | str, question_file: Path | None) -> _Asker:
    """The questions of dataset ``name``: ``QUESTIONS`` (the first paraphrases) when ``question_file`` is None,
    else every paraphrase of its group in that file, drawn by an RNG of their own (so the rows do not change)."""
    default = QUESTIONS[name]
    if question_file is None:
        texts = {k: [v] for k, v in default.items()} if isinstance(default, dict) else [default]
        return _Asker(name, texts, None)
    labels = tuple(default) if isinstance(default, dict) else None
    texts = _paraphrase_group(question_file, load_paraphrases(question_file), (name,), labels, name in FILLED_GROUPS)
    return _Asker(name, texts, random.Random(f"ao_classification:{name}:{seed}:paraphrases"))


def _paraphrase_group(path: Path, paraphrases: Mapping, keys: tuple[str, ...], labels: tuple[str, ...] | None,
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


def _question_file(data_dir: str | Path | None) -> Path:
    return (Path(data_dir) if data_dir is not None else shipped_data_dir()) / QUESTION_FILE


def _nearest_question_file(path: Path) -> Path:
    """paraphrases/question.json in the file's folder or up to three folders above it, else the shipped one."""
    for folder in list(path.resolve().parents)[:4]:
        if (folder / QUESTION_FILE).is_file():
            return folder / QUESTION_FILE
    return _question_file(None)


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


def _gmt_items(path: Path, rel: str) -> tuple[list, list]:
    """(file, statement) items of a geometry-of-truth CSV: the true ones, then the false ones."""
    yes_items, no_items = [], []
    for index, row in enumerate(_read_csv(path, ("statement", "label"))):
        statement = _nonempty(path, index, "statement", row["statement"])
        label = GMT_LABELS[_choice(path, index, "label", row["label"], GMT_LABELS)]
        (yes_items if label else no_items).append((rel, statement))
    return yes_items, no_items


def _statement_rows(name: str, yes_items: list, no_items: list, n: int, rng: random.Random,
                    ask: _Asker) -> list[dict]:
    """Rows for datasets whose answer is fixed by the statement (geometry_of_truth, relations)."""
    yes, no = _pick_labelled(rng, yes_items, no_items, n, key=lambda item: item[0])
    return _finish(rng, [_row(name, s, ask(), True) for _, s in yes] + [_row(name, s, ask(), False) for _, s in no])


def _geometry_of_truth(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    yes_items, no_items = [], []
    for rel in GMT_FILES:
        yes, no = _gmt_items(_require_file("geometry_of_truth", data_dir / rel), rel)
        yes_items += yes
        no_items += no
    return _statement_rows("geometry_of_truth", yes_items, no_items, n, rng, ask)


def _relation_items(path: Path, rel: str, rng: random.Random) -> tuple[list, list]:
    """(file, statement) items of one relations JSON: each sample true, and with a wrong object where one exists."""
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
    yes_items, no_items = [], []
    for subject, obj in pairs:
        stem = templates[rng.randrange(len(templates))].strip().replace("{}", subject, 1)
        yes_items.append((rel, f"{stem} {obj}."))
        wrong = [o for o in objects if o not in true_for[subject]]
        if wrong:
            no_items.append((rel, f"{stem} {rng.choice(wrong)}."))
    return yes_items, no_items


def _relations(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    root = data_dir / "relations"
    files = sorted(root.glob("*/*.json"), key=lambda p: p.relative_to(root).as_posix()) if root.is_dir() else []
    if not files:
        raise ClassificationDataUnavailable(
            f"classification dataset 'relations': no files matching {root}/<type>/<name>.json")
    yes_items, no_items = [], []
    for path in files:
        yes, no = _relation_items(path, path.relative_to(root).as_posix(), rng)
        yes_items += yes
        no_items += no
    return _statement_rows("relations", yes_items, no_items, n, rng, ask)


def _ag_news_items(path: Path) -> list[tuple[str, str]]:
    items = []
    for index, row in enumerate(_read_csv(path, ("Class Index", "Title", "Description"))):
        label = _choice(path, index, "Class Index", row["Class Index"], AG_NEWS_TOPICS)
        title = _nonempty(path, index, "Title", row["Title"])
        description = _nonempty(path, index, "Description", row["Description"])
        items.append((label, f"{title}\n\n{description}"))
    return items


def _ag_news_rows(items: list, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, context), yes in zip(picked, _balanced_flags(rng, len(picked))):
        topic = label if yes else rng.choice([x for x in AG_NEWS_TOPICS if x != label])
        rows.append(_row("ag_news", context, ask(fill=AG_NEWS_TOPICS[topic]), yes))
    return _finish(rng, rows)


def _ag_news(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    return _ag_news_rows(_ag_news_items(_require_file("ag_news", data_dir / "ag_news" / "ag_news.csv")), n, rng, ask)


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


def _ner_rows(sentences: list, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    sentences = [(text, ents) for text, ents in sentences if ents]
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
        rows.append(_row("ner", text, ask(fill=entity), yes))
    return _finish(rng, rows)


def _ner(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    return _ner_rows(_ner_sentences(_require_file("ner", data_dir / "ner" / "ner.csv")), n, rng, ask)


def _tense_items(path: Path) -> list[tuple[str, str]]:
    data = _read_json(path)
    if not isinstance(data, list):
        raise DataValidationError(str(path), 0, None, "the file must hold a JSON list of {sentence, label}")
    items = []
    for index, example in enumerate(data):
        if not isinstance(example, dict):
            raise DataValidationError(str(path), index, None, "each example must be a JSON object")
        sentence = _nonempty(path, index, "sentence", example.get("sentence"))
        items.append((_choice(path, index, "label", example.get("label"), TENSES), sentence))
    return items


def _tense_rows(items: list, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, sentence), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else rng.choice([t for t in TENSES if t != label])
        rows.append(_row("tense", sentence, ask(fill=asked), yes))
    return _finish(rng, rows)


def _tense(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    return _tense_rows(_tense_items(_require_file("tense", data_dir / "tense" / "tense_processed.json")), n, rng, ask)


def _singular_plural_items(path: Path) -> list[tuple[str, str]]:
    items = []
    for index, row in enumerate(_read_csv(path, ("sentence", "n_subjects"))):
        sentence = _nonempty(path, index, "sentence", row["sentence"])
        items.append((_choice(path, index, "n_subjects", row["n_subjects"], NUMBERS), sentence))
    return items


def _singular_plural_rows(items: list, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    picked = _round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, sentence), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else next(x for x in NUMBERS if x != label)
        rows.append(_row("singular_plural", sentence, ask(asked), yes))
    return _finish(rng, rows)


def _singular_plural(data_dir: Path, n: int, rng: random.Random, ask: _Asker) -> list[dict]:
    path = _require_file("singular_plural", data_dir / "singular_plural" / "singular_plural.csv")
    return _singular_plural_rows(_singular_plural_items(path), n, rng, ask)


def _engels_probe(path: Path, paraphrases: Mapping) -> tuple[str, str, str]:
    """(group in question.json's "engels" block, label of target 1, label of target 0) named by the file name."""
    if path.name in ENGELS_PROBES:
        return ENGELS_PROBES[path.name]
    match = re.fullmatch(r"\d+_(.+)\.csv", path.name, flags=re.IGNORECASE)
    block = paraphrases.get("engels")
    group = match.group(1).lower() if match else None
    if group and isinstance(block, Mapping) and isinstance(block.get(group), Mapping) and len(block[group]) == 2:
        positive, negative = block[group]
        return group, positive, negative
    raise DataValidationError(str(path), 0, None,
                              f"an Engels file name must be <n>_<probe>.csv naming a known probe "
                              f"({', '.join(ENGELS_PROBES)}) or a two-label group of question.json's 'engels' block")


def _engels_items(path: Path, positive: str, negative: str) -> list[tuple[str, str]]:
    """(class label, prompt) for each row of an Engels CSV."""
    items = []
    for index, row in enumerate(_read_csv(path, ("prompt", "target"))):
        prompt = _nonempty(path, index, "prompt", row["prompt"])
        target = ENGELS_TARGETS[_choice(path, index, "target", row["target"], ENGELS_TARGETS)]
        length = row.get("prompt_len")
        if length is not None and not length.strip().isdigit():
            raise DataValidationError(str(path), index, "prompt_len", f"must be a whole number, got {length!r}")
        items.append((positive if target else negative, prompt))
    return items


def _engels_file_rows(path: Path, n: int | None, seed: int, all_paraphrases: bool, question_file: Path,
                      rng: random.Random) -> list[dict]:
    """Rows of one Engels probe (all of them when ``n`` is None): a Yes row asks its own class's question, a No
    row the other class's."""
    paraphrases = load_paraphrases(question_file)
    group, positive, negative = _engels_probe(path, paraphrases)
    name = ENGELS_PREFIX + group
    texts = _paraphrase_group(question_file, paraphrases, ("engels", group), (positive, negative), False)
    ask = _Asker(f"engels/{group}", texts,
                 random.Random(f"ao_classification:{name}:{seed}:{path.name}:paraphrases") if all_paraphrases else None)
    items = _engels_items(path, positive, negative)
    picked = _round_robin(rng, items, len(items) if n is None else n, key=lambda item: item[0])
    rows = []
    for (label, prompt), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else (negative if label == positive else positive)
        rows.append(_row(name, prompt, ask(asked), yes))
    return _finish(rng, rows)


_FILE_BUILDERS: dict[str, Callable[[Path, int, random.Random, _Asker], list[dict]]] = {
    "geometry_of_truth": _geometry_of_truth,
    "relations": _relations,
    "ag_news": _ag_news,
    "ner": _ner,
    "tense": _tense,
    "singular_plural": _singular_plural,
}


def _all_statement_rows(name: str, items: tuple[list, list], rng: random.Random, ask: _Asker) -> list[dict]:
    yes_items, no_items = items
    return _statement_rows(name, yes_items, no_items, len(yes_items) + len(no_items), rng, ask)


def _all_rows(build: Callable[[list, int, random.Random, _Asker], list[dict]], items: list, rng: random.Random,
              ask: _Asker) -> list[dict]:
    return build(items, len(items), rng, ask)


# Layout -> every row of one file in it (load_labelled_file); Engels and labelled JSONL files are read apart.
_FILE_ROWS: dict[str, Callable[[Path, random.Random, _Asker], list[dict]]] = {
    "geometry_of_truth": lambda p, rng, ask: _all_statement_rows("geometry_of_truth", _gmt_items(p, p.name), rng,
                                                                 ask),
    "relations": lambda p, rng, ask: _all_statement_rows("relations", _relation_items(p, p.name, rng), rng, ask),
    "tense": lambda p, rng, ask: _all_rows(_tense_rows, _tense_items(p), rng, ask),
    "singular_plural": lambda p, rng, ask: _all_rows(_singular_plural_rows, _singular_plural_items(p), rng, ask),
    "ag_news": lambda p, rng, ask: _all_rows(_ag_news_rows, _ag_news_items(p), rng, ask),
    "ner": lambda p, rng, ask: _all_rows(_ner_rows, _ner_sentences(p), rng, ask),
}
# CSV layout -> the columns that identify it (checked in this order).
_CSV_LAYOUTS: dict[str, tuple[str, ...]] = {
    "geometry_of_truth": ("statement", "label"),
    "singular_plural": ("sentence", "n_subjects"),
    "engels": ("prompt", "target"),
    "ag_news": ("Class Index", "Title", "Description"),
    "ner": ("Sentence #", "Word", "Tag"),
}
LAYOUTS: tuple[str, ...] = (*_CSV_LAYOUTS, "relations", "tense", "labelled_jsonl")
_KNOWN: tuple[str, ...] = (*DATASETS, *ENGELS_DATASETS)


def _jsonl_rows(path: Path) -> list[dict]:
    """The project's labelled JSONL rows (read by ao_calib_tasks.oracle.data), with a dataset and question group."""
    from .data import load_labelled_rows  # lazy: it imports datasets

    rows = []
    for row in load_labelled_rows(path, "labelled data file"):
        dataset = row.get("dataset") if isinstance(row.get("dataset"), str) and row["dataset"] else path.stem
        rows.append({**row, "dataset": dataset, "question_group": row.get("question_group") or dataset})
    return rows


# ---------------------------------------------------------------------------------------------- splitting


def _check_fractions(fractions: Sequence[float]) -> tuple[float, float, float]:
    values = tuple(fractions)
    if (len(values) != 3 or any(isinstance(f, bool) or not isinstance(f, (int, float)) or f < 0 for f in values)
            or abs(sum(values) - 1) > 1e-9):
        raise ValueError(f"fractions must be three non-negative numbers (train, validation, test) summing to 1, "
                         f"got {fractions!r}")
    return values  # type: ignore[return-value]


def _assign_prompts(rows: list[dict], split_of: dict[str, str], fractions: tuple[float, float, float],
                    rng: random.Random) -> None:
    """Gives each prompt of one dataset not yet in ``split_of`` a split, cutting each answer group by fractions."""
    answers: dict[str, set[str]] = {}
    for row in rows:
        if row["prompt"] not in split_of:
            answers.setdefault(row["prompt"], set()).add(row["answer"])
    strata: dict[tuple[str, ...], list[str]] = {}
    for prompt in sorted(answers):  # sorted: the split does not depend on the rows' order
        strata.setdefault(tuple(sorted(answers[prompt])), []).append(prompt)
    for key in sorted(strata):
        prompts = strata[key]
        rng.shuffle(prompts)
        cut_train = round(len(prompts) * fractions[0])
        cut_validation = round(len(prompts) * (fractions[0] + fractions[1]))
        for i, prompt in enumerate(prompts):
            split_of[prompt] = SPLITS[0] if i < cut_train else SPLITS[1] if i < cut_validation else SPLITS[2]


def _balanced(rows: list[dict], rng: random.Random) -> list[dict]:
    """``rows`` less random rows of the larger answer, so Yes and No are even (unchanged if one is absent)."""
    yes = [i for i, r in enumerate(rows) if r["answer"] == YES]
    no = [i for i, r in enumerate(rows) if r["answer"] == NO]
    if not yes or not no or len(yes) == len(no):
        return rows
    larger, smaller = (yes, no) if len(yes) > len(no) else (no, yes)
    larger.sort(key=lambda i: (rows[i]["prompt"], str(rows[i].get("question"))))  # so input order does not matter
    dropped = set(rng.sample(larger, len(larger) - len(smaller)))
    return [r for i, r in enumerate(rows) if i not in dropped]


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


def _sst2(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
         ask: _Asker) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "label", {0: "negative", 1: "positive"}, ("sentence",))
    picked = [(label, text) for label, d, i in _round_robin(rng, items, n, key=lambda item: item[0])
              if (text := _text(d, "sentence", i))]
    rows = []
    for (label, text), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else ("negative" if label == "positive" else "positive")
        rows.append(_row("sst2", text, ask(asked), yes))
    return _finish(rng, rows)


def _md_gender(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
              ask: _Asker) -> list[dict]:
    items = _hub_items(data, splits, hub_id, "gender", {1: "female", 2: "male"}, ("text", "title"))
    picked = []
    for label, d, i in _round_robin(rng, items, n, key=lambda item: item[0]):
        text, entity = _text(d, "text", i), _text(d, "title", i)
        if text and entity:
            picked.append((label, f"{text}\n\nThis text is about {entity}."))
    rows = []
    for (label, context), yes in zip(picked, _balanced_flags(rng, len(picked))):
        asked = label if yes else ("male" if label == "female" else "female")
        rows.append(_row("md_gender", context, ask(fill=asked), yes))
    return _finish(rng, rows)


def _snli(data: Any, splits: Sequence[str], hub_id: str, n: int, rng: random.Random,
         ask: _Asker) -> list[dict]:
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
                question, group = ask()
                rows.append(_row("snli", premise, (f"{question} {hypothesis}", group), answer))
    return _finish(rng, rows)


_HUB_BUILDERS: dict[str, Callable[[Any, Sequence[str], str, int, random.Random, _Asker], list[dict]]] = {
    "sst2": _sst2,
    "md_gender": _md_gender,
    "snli": _snli,
}
