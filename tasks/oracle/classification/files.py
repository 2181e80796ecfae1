"""The file-based classification datasets (geometry of truth, relations, AG News, NER, tense, singular/plural,
the Engels probes): each read from its files into rows, and the layouts of a labelled file."""

from __future__ import annotations

import csv
import io
import random
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from ao_calib.core.errors import DataValidationError

from .catalog import (AG_NEWS_TOPICS, CLASS_WORDS, ENGELS_PREFIX, ENGELS_PROBES, ENGELS_TARGETS,
                                     GMT_FILES, GMT_LABELS, NUMBERS, OPEN_QUESTIONS, OPEN_TWO_CLASSES, TENSES,
                                     ClassificationDataUnavailable)
from .reading import (Asker, Statement, balanced_asks, balanced_flags, choice_of, load_paraphrases,
                                     nonempty, paraphrase_group, pick_labelled, question_row, read_csv, read_json,
                                     require_file, round_robin, shuffled)

TRUE, FALSE = CLASS_WORDS["geometry_of_truth"]["1"], CLASS_WORDS["geometry_of_truth"]["0"]


def _gmt_items(path: Path, rel: str) -> tuple[list, list]:
    """(file, statement, open answer) items of a geometry-of-truth CSV: the true ones, then the false ones."""
    yes_items, no_items = [], []
    for index, row in enumerate(read_csv(path, ("statement", "label"))):
        statement = nonempty(path, index, "statement", row["statement"])
        label = GMT_LABELS[choice_of(path, index, "label", row["label"], GMT_LABELS)]
        (yes_items if label else no_items).append((rel, statement, TRUE if label else FALSE))
    return yes_items, no_items


def _statement_rows(name: str, yes_items: list, no_items: list, n: int, rng: random.Random,
                    ask: Asker) -> list[dict]:
    """Rows for datasets whose answer is fixed by the statement (geometry_of_truth, relations): each asks whether
    it is true; its open question asks for its truth (geometry_of_truth) or the object it names (relations)."""
    yes, no = pick_labelled(rng, yes_items, no_items, n, key=lambda item: item[0])

    def row(item: tuple, true: bool) -> dict:
        rel, text, fact = item
        subset = Path(rel).stem if name == "geometry_of_truth" else Path(rel).parent.name  # its file; its group
        return question_row(name, text, ask(), true,
                            Statement(TRUE if true else FALSE, TRUE, fact, OPEN_QUESTIONS[name], subset))

    return shuffled(rng, [row(item, True) for item in yes] + [row(item, False) for item in no])


def _geometry_of_truth(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    yes_items, no_items = [], []
    for rel in GMT_FILES:
        yes, no = _gmt_items(require_file("geometry_of_truth", data_dir / rel), rel)
        yes_items += yes
        no_items += no
    return _statement_rows("geometry_of_truth", yes_items, no_items, n, rng, ask)


def _relation_items(path: Path, rel: str, rng: random.Random) -> tuple[list, list]:
    """(file, statement) items of one relations JSON: each sample true, and with a wrong object where one exists."""
    data = read_json(path)
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
        pairs.append((nonempty(path, index, "subject", sample.get("subject")),
                      nonempty(path, index, "object", sample.get("object"))))
    objects = sorted({obj for _, obj in pairs})
    true_for: dict[str, set[str]] = {}
    for subject, obj in pairs:
        true_for.setdefault(subject, set()).add(obj)
    yes_items, no_items = [], []
    for subject, obj in pairs:
        stem = templates[rng.randrange(len(templates))].strip().replace("{}", subject, 1)
        yes_items.append((rel, f"{stem} {obj}.", obj))
        wrong = [o for o in objects if o not in true_for[subject]]
        if wrong:
            named = rng.choice(wrong)
            no_items.append((rel, f"{stem} {named}.", named))
    return yes_items, no_items


def _relations(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
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
    for index, row in enumerate(read_csv(path, ("Class Index", "Title", "Description"))):
        label = choice_of(path, index, "Class Index", row["Class Index"], AG_NEWS_TOPICS)
        title = nonempty(path, index, "Title", row["Title"])
        description = nonempty(path, index, "Description", row["Description"])
        items.append((label, f"{title}\n\n{description}"))
    return items


def _ag_news_rows(items: list, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    picked = round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, context), yes in zip(picked, balanced_flags(rng, len(picked))):
        topic = label if yes else rng.choice([x for x in AG_NEWS_TOPICS if x != label])
        rows.append(question_row("ag_news", context, ask(fill=AG_NEWS_TOPICS[topic]), yes))
    return shuffled(rng, rows)


def _ag_news(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    return _ag_news_rows(_ag_news_items(require_file("ag_news", data_dir / "ag_news" / "ag_news.csv")), n, rng, ask)


def decode_ner(raw: bytes) -> str:
    for encoding in ("utf-8-sig", "unicode_escape", "latin-1"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes any bytes")  # pragma: no cover


_IOB = re.compile(r"^(O|[BI]-.+)$")


def ner_sentences(path: Path) -> list[tuple[str, list[str]]]:
    """(sentence text, entities in order of appearance) for every sentence of a Kaggle-style IOB CSV."""
    rows = read_csv(path, ("Sentence #", "Word", "Tag"), text=decode_ner(path.read_bytes()))
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


def _ner_rows(sentences: list, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    sentences = [(text, ents) for text, ents in sentences if ents]
    all_entities = sorted({e for _, ents in sentences for e in ents})
    picked = round_robin(rng, sentences, n, key=lambda _: "")
    rows = []
    for (text, entities), yes in zip(picked, balanced_flags(rng, len(picked))):
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
        rows.append(question_row("ner", text, ask(fill=entity), yes))
    return shuffled(rng, rows)


def _ner(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    return _ner_rows(ner_sentences(require_file("ner", data_dir / "ner" / "ner.csv")), n, rng, ask)


def _tense_items(path: Path) -> list[tuple[str, str]]:
    data = read_json(path)
    if not isinstance(data, list):
        raise DataValidationError(str(path), 0, None, "the file must hold a JSON list of {sentence, label}")
    items = []
    for index, example in enumerate(data):
        if not isinstance(example, dict):
            raise DataValidationError(str(path), index, None, "each example must be a JSON object")
        sentence = nonempty(path, index, "sentence", example.get("sentence"))
        items.append((choice_of(path, index, "label", example.get("label"), TENSES), sentence))
    return items


def _tense_rows(items: list, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    picked = round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    for (label, sentence), (yes, asked) in zip(picked, balanced_asks(rng, [p[0] for p in picked], TENSES)):
        rows.append(question_row("tense", sentence, ask(fill=asked), yes,
                                 Statement(label, asked, label, OPEN_QUESTIONS["tense"])))
    return shuffled(rng, rows)


def _tense(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    return _tense_rows(_tense_items(require_file("tense", data_dir / "tense" / "tense_processed.json")), n, rng, ask)


def _singular_plural_items(path: Path) -> list[tuple[str, str]]:
    items = []
    for index, row in enumerate(read_csv(path, ("sentence", "n_subjects"))):
        sentence = nonempty(path, index, "sentence", row["sentence"])
        items.append((choice_of(path, index, "n_subjects", row["n_subjects"], NUMBERS), sentence))
    return items


def _singular_plural_rows(items: list, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    picked = round_robin(rng, items, n, key=lambda item: item[0])
    rows = []
    words = CLASS_WORDS["singular_plural"]
    for (label, sentence), (yes, asked) in zip(picked, balanced_asks(rng, [p[0] for p in picked], NUMBERS)):
        rows.append(question_row("singular_plural", sentence, ask(asked), yes,
                                 Statement(words[label], words[asked], words[label],
                                           OPEN_QUESTIONS["singular_plural"])))
    return shuffled(rng, rows)


def _singular_plural(data_dir: Path, n: int, rng: random.Random, ask: Asker) -> list[dict]:
    path = require_file("singular_plural", data_dir / "singular_plural" / "singular_plural.csv")
    return _singular_plural_rows(_singular_plural_items(path), n, rng, ask)


def engels_probe(path: Path, paraphrases: Mapping) -> tuple[str, str, str]:
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
    for index, row in enumerate(read_csv(path, ("prompt", "target"))):
        prompt = nonempty(path, index, "prompt", row["prompt"])
        target = ENGELS_TARGETS[choice_of(path, index, "target", row["target"], ENGELS_TARGETS)]
        length = row.get("prompt_len")
        if length is not None and not length.strip().isdigit():
            raise DataValidationError(str(path), index, "prompt_len", f"must be a whole number, got {length!r}")
        items.append((positive if target else negative, prompt))
    return items


def engels_file_rows(path: Path, n: int | None, seed: int, all_paraphrases: bool, question_file: Path,
                      rng: random.Random) -> list[dict]:
    """Rows of one Engels probe (all of them when ``n`` is None): a Yes row asks its own class's question, a No
    row the other class's."""
    paraphrases = load_paraphrases(question_file)
    group, positive, negative = engels_probe(path, paraphrases)
    name = ENGELS_PREFIX + group
    texts = paraphrase_group(question_file, paraphrases, ("engels", group), (positive, negative), False)
    ask = Asker(f"engels/{group}", texts,
                 random.Random(f"ao_classification:{name}:{seed}:{path.name}:paraphrases") if all_paraphrases else None)
    items = _engels_items(path, positive, negative)
    picked = round_robin(rng, items, len(items) if n is None else n, key=lambda item: item[0])
    words = {label: label.replace("_", " ") for label in (positive, negative)}
    open_questions = tuple(q.format(words[positive], words[negative]) for q in OPEN_TWO_CLASSES)
    rows = []
    for (label, prompt), (yes, asked) in zip(picked, balanced_asks(rng, [p[0] for p in picked],
                                                                  (positive, negative))):
        rows.append(question_row(name, prompt, ask(asked), yes,
                                 Statement(words[label], words[asked], words[label], open_questions)))
    return shuffled(rng, rows)


FILE_BUILDERS: dict[str, Callable[[Path, int, random.Random, Asker], list[dict]]] = {
    "geometry_of_truth": _geometry_of_truth,
    "relations": _relations,
    "ag_news": _ag_news,
    "ner": _ner,
    "tense": _tense,
    "singular_plural": _singular_plural,
}


def _all_statement_rows(name: str, items: tuple[list, list], rng: random.Random, ask: Asker) -> list[dict]:
    yes_items, no_items = items
    return _statement_rows(name, yes_items, no_items, len(yes_items) + len(no_items), rng, ask)


def _all_rows(build: Callable[[list, int, random.Random, Asker], list[dict]], items: list, rng: random.Random,
              ask: Asker) -> list[dict]:
    return build(items, len(items), rng, ask)


# Layout -> every row of one file in it (load_labelled_file); Engels and labelled JSONL files are read apart.
FILE_ROWS: dict[str, Callable[[Path, random.Random, Asker], list[dict]]] = {
    "geometry_of_truth": lambda p, rng, ask: _all_statement_rows("geometry_of_truth", _gmt_items(p, p.name), rng,
                                                                 ask),
    "relations": lambda p, rng, ask: _all_statement_rows(
        "relations", _relation_items(p, f"{p.parent.name}/{p.name}", rng), rng, ask),
    "tense": lambda p, rng, ask: _all_rows(_tense_rows, _tense_items(p), rng, ask),
    "singular_plural": lambda p, rng, ask: _all_rows(_singular_plural_rows, _singular_plural_items(p), rng, ask),
    "ag_news": lambda p, rng, ask: _all_rows(_ag_news_rows, _ag_news_items(p), rng, ask),
    "ner": lambda p, rng, ask: _all_rows(_ner_rows, ner_sentences(p), rng, ask),
}
# CSV layout -> the columns that identify it (checked in this order).
CSV_LAYOUTS: dict[str, tuple[str, ...]] = {
    "geometry_of_truth": ("statement", "label"),
    "singular_plural": ("sentence", "n_subjects"),
    "engels": ("prompt", "target"),
    "ag_news": ("Class Index", "Title", "Description"),
    "ner": ("Sentence #", "Word", "Tag"),
}
LAYOUTS: tuple[str, ...] = (*CSV_LAYOUTS, "relations", "tense", "labelled_jsonl")


def jsonl_rows(path: Path) -> list[dict]:
    """The project's labelled JSONL rows (read by ``rows.files``), with a dataset and question group."""
    from ..rows.files import load_labelled_rows  # lazy: it imports datasets

    rows = []
    for row in load_labelled_rows(path, "labelled data file"):
        dataset = row.get("dataset") if isinstance(row.get("dataset"), str) and row["dataset"] else path.stem
        rows.append({**row, "dataset": dataset, "question_group": row.get("question_group") or dataset})
    return rows


def detect_layout(path: str | Path) -> str:
    """Which of ``LAYOUTS`` a labelled file is in, from its suffix and its CSV header or JSON top level."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        return "labelled_jsonl"
    if suffix == ".json":
        data = read_json(path)
        if isinstance(data, dict):
            return "relations"
        if isinstance(data, list):
            return "tense"
        raise DataValidationError(str(path), 0, None, "a .json data file must hold a relations object "
                                  "({prompt_templates, samples}) or a tense list of {sentence, label}")
    if suffix == ".csv":
        header = next(csv.reader(io.StringIO(decode_ner(path.read_bytes()), newline="")), None) or []
        columns = {c.strip() for c in header}
        for layout, required in CSV_LAYOUTS.items():
            if set(required) <= columns:
                return layout
        expected = "; ".join(f"{k}: {', '.join(v)}" for k, v in CSV_LAYOUTS.items())
        raise DataValidationError(str(path), 0, None,
                                  f"unrecognised CSV layout: header {header} (expected the columns of {expected})")
    raise DataValidationError(str(path), 0, None,
                              f"unrecognised data file suffix {path.suffix!r} (expected .csv, .json or .jsonl)")
