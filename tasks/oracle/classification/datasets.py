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

import random
from collections.abc import Iterable
from pathlib import Path

from ao_calib.core.errors import AOCalibError, MissingDataFileError

from .catalog import (DATA_FILES, DATASETS, ENGELS_DATASETS, ENGELS_FILES, ENGELS_PREFIX,
                                     ENGELS_PROBES, FILE_DATASETS, HUB_DATASETS, HUB_SOURCES, KNOWN, OOD_SPLIT,
                                     QUESTION_PREFIX, QUESTIONS, SPLITS, TENSES, ClassificationDataUnavailable,
                                     HubLoader, is_engels, shipped_data_dir)
from .files import FILE_BUILDERS, FILE_ROWS, detect_layout, engels_file_rows, engels_probe, jsonl_rows
from .hub import HUB_BUILDERS, call_hub
from .reading import asker, load_paraphrases, nearest_question_file, question_file_in, require_file
from .splits import split_by_prompt

# the names the task's modules and its tests read from here, wherever they are defined
__all__ = ["DATASETS", "ENGELS_DATASETS", "ENGELS_PROBES", "FILE_DATASETS", "HUB_DATASETS", "OOD_SPLIT",
           "QUESTION_PREFIX", "QUESTIONS", "SPLITS", "TENSES", "ClassificationDataUnavailable", "detect_layout",
           "is_engels", "load_classification", "load_folder", "load_labelled_file", "load_paraphrases", "load_suite",
           "shipped_data_dir", "split_by_prompt"]


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
        raise AOCalibError(f"unknown classification dataset {name!r}; choose from {', '.join(KNOWN)}")
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    rng = random.Random(f"ao_classification:{name}:{seed}")
    if name in HUB_DATASETS:
        ask = asker(name, seed, question_file_in(data_dir) if all_paraphrases else None)
        hub_id, config, splits = HUB_SOURCES[name]
        data = call_hub(name, hub_id, config, hub_loader)
        rows = HUB_BUILDERS[name](data, splits, hub_id, n, rng, ask)
    else:
        if data_dir is None:
            files = DATA_FILES.get(name) or (f"engels/{ENGELS_FILES.get(name)}",)
            raise ClassificationDataUnavailable(
                f"classification dataset '{name}' is read from files ({', '.join(files)}) but no "
                "data_dir was given; point it at a copy of the reference repo's datasets/classification_datasets")
        if name in ENGELS_FILES:
            path = require_file(name, Path(data_dir) / "engels" / ENGELS_FILES[name])
            rows = engels_file_rows(path, n, seed, all_paraphrases, question_file_in(data_dir), rng)
        else:
            ask = asker(name, seed, question_file_in(data_dir) if all_paraphrases else None)
            rows = FILE_BUILDERS[name](Path(data_dir), n, rng, ask)
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
        raise AOCalibError(f"unknown classification dataset(s) {unknown}; choose from {', '.join(KNOWN)}")
    loaded: dict[str, list[dict]] = {}
    skipped: dict[str, str] = {}
    for name in dict.fromkeys(names):
        try:
            loaded[name] = load_classification(name, data_dir, n=n, seed=seed, hub_loader=hub_loader,
                                               all_paraphrases=all_paraphrases)
        except ClassificationDataUnavailable as exc:
            skipped[name] = str(exc)
    return loaded, skipped


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
        return jsonl_rows(path)
    questions = Path(paraphrases_path) if paraphrases_path is not None else nearest_question_file(path)
    if layout == "engels":
        dataset = ENGELS_PREFIX + engels_probe(path, load_paraphrases(questions))[0]
        rng = random.Random(f"ao_classification:{dataset}:{seed}:{path.name}")
        return engels_file_rows(path, None, seed, all_paraphrases, questions, rng)
    rng = random.Random(f"ao_classification:{layout}:{seed}:{path.name}")
    ask = asker(layout, f"{seed}:{path.name}", questions if all_paraphrases else None)
    return FILE_ROWS[layout](path, rng, ask)


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
