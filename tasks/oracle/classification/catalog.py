"""The classification datasets' catalogue: their names, files, hub sources, the questions they ask and the
labels they read (see ``datasets`` for how rows are built from them)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ao_calib.core.errors import AOCalibError
from ao_calib.core.shipped import shipped_dir, shipped_places

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

# Each dataset's open question, asked of a statement beside its yes/no one: the warm-up's open rows
# (task.warmup_rows.open_fraction) and the open rows of the held-out splits, answered by the statement's class in the
# words of ``CLASS_WORDS`` (relations: the object it names) and scored by exact class. The options are named so that
# the question alone says which words count; an Engels probe is asked ``OPEN_TWO_CLASSES`` with its two labels.
OPEN_QUESTIONS: dict[str, tuple[str, ...]] = {
    "geometry_of_truth": ("Is this statement true or false?", "Would you call this statement true or false?"),
    "relations": ("Which object does this statement name?", "What is the object this statement names?"),
    "tense": ("Which tense is this sentence in: past, present or future?",
              "Is this sentence in the past, present or future tense?"),
    "singular_plural": ("Does this sentence mention one person or several?",
                        "Is this sentence about one person or several?"),
}
OPEN_TWO_CLASSES = ("Which fits this text: {} or {}?", "Is this text {} or {}?")
# The class labels of the files -> the words an open answer names them with.
CLASS_WORDS: dict[str, dict[str, str]] = {
    "geometry_of_truth": {"1": "true", "0": "false"},
    "singular_plural": {"single": "one", "multiple": "several"},
}
OPEN_GROUP = "open"  # the question_group suffix of a dataset's open rows
OPEN_FORM = "open"  # the question_form of an open row (a yes/no row has none)

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

# The shipped copy of the data: data/ao_classification, in the package or the clone (see shipped_data_dir).
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
KNOWN: tuple[str, ...] = (*DATASETS, *ENGELS_DATASETS)


class ClassificationDataUnavailable(AOCalibError):
    """A classification dataset cannot be loaded here: a file is missing, or the hub cannot be reached."""


def is_engels(dataset: str) -> bool:
    """Whether ``dataset`` is one of the Engels probes (out-of-distribution test rows in ``split_by_prompt``)."""
    return dataset.startswith(ENGELS_PREFIX)


def shipped_data_dir(setting_key: str = DATA_DIR_KEY) -> Path:
    """The classification files shipped with ao_calib, ``data/ao_classification``: the installed package's copy
    (a non-editable install), else the clone's (a run from the clone, an editable install); see
    ``ao_calib.core.shipped``. Found in neither: ``ClassificationDataUnavailable`` asking for ``setting_key`` to be
    set to a copy of the folder."""
    folder = shipped_dir("data") / SHIPPED_DIR.name
    if not (folder / QUESTION_FILE).is_file():
        packaged, clone = (data / SHIPPED_DIR.name for data in shipped_places("data"))
        raise ClassificationDataUnavailable(
            f"the shipped classification data ({SHIPPED_DIR}) is neither in the installed package ({packaged}) nor "
            f"in a clone of the repository ({clone}); set {setting_key} to a copy of it")
    return folder
