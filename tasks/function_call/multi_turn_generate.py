"""Multi-turn training cases over BFCL's own API classes that are not BFCL's cases: a file system to work in
(``GorillaFileSystem``) and calculations on what it holds (``MathAPI``), several user turns each, in BFCL's case
format (``id``, ``question`` as turns of one user message, ``initial_config``, ``involved_classes``,
``ground_truth`` as call strings per turn). Every case is played on its classes while it is written: each ground-
truth call runs without an error, so the trajectories an SFT warm-up imitates are right by construction.

Seeded and deterministic; ``split_cases`` holds out a test split (and a validation split) by case. The words files
and folders are named with never occur in BFCL's multi-turn cases (a test checks that no BFCL question or ground
truth appears here)."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .bfcl_multi_turn import Environment
from .parsing import parse_calls

FOLDERS = ("orchard", "lantern", "harbor", "meadow", "quarry", "glacier", "canyon", "prairie", "tundra", "delta")
STEMS = ("ledger", "almanac", "memo", "roster", "tally", "digest", "journal", "inventory", "brief", "manifest")
EXTENSIONS = (".txt", ".md", ".log")
WORDS = ("amber", "cobalt", "saffron", "indigo", "violet", "scarlet", "ochre", "teal", "ivory", "umber")


@dataclass
class Draft:
    """A case being written: its turns (a user message and its ground-truth calls), played as it grows."""

    case_id: str
    config: dict
    classes: list[str]
    turns: list[tuple[str, list[str]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.environment = Environment({"id": self.case_id, "initial_config": self.config,
                                        "involved_classes": self.classes})

    def add(self, message: str, calls: list[str]) -> list[str]:
        """One user turn and its calls, run now; a call that fails means the generator is wrong."""
        results = [self.environment.call(call) for text in calls for call in parse_calls(text)]
        failed = [r for r in results if r.startswith("Error during execution") or '"error"' in r]
        if failed:
            raise AssertionError(f"{self.case_id}: {calls} -> {failed}")
        self.turns.append((message, calls))
        return results

    def case(self) -> dict:
        return {"id": self.case_id, "question": [[{"role": "user", "content": m}] for m, _ in self.turns],
                "initial_config": self.config, "involved_classes": self.classes,
                "ground_truth": [calls for _, calls in self.turns]}


def _file_system(rng: random.Random) -> tuple[dict, str, list[str]]:
    """(initial_config, the workspace folder, its files) of a small tree under the user's home."""
    folder = rng.choice(FOLDERS)
    names = rng.sample([s + e for s in STEMS for e in EXTENSIONS], 3)
    contents = {name: "\n".join(" ".join(rng.sample(WORDS, 3)) for _ in range(rng.randint(2, 5))) for name in names}
    tree = {"root": {"user": {"type": "directory", "contents": {
        folder: {"type": "directory", "contents": {n: {"type": "file", "content": c} for n, c in contents.items()}}}}}}
    return {"GorillaFileSystem": tree}, folder, names


def _count_case(draft: Draft, rng: random.Random, folder: str, files: list[str]) -> None:
    name = rng.choice(files)
    mode, noun = rng.choice((("l", "lines"), ("w", "words"), ("c", "characters")))
    draft.add(f"Go into the '{folder}' folder.", [f"cd(folder={folder!r})"])
    result = draft.add(f"How many {noun} does '{name}' have?", [f"wc(file_name={name!r}, mode={mode!r})"])
    count = parse_count(result[0])
    factor = rng.randint(2, 9)
    draft.add(f"Multiply that count by {factor}.", [f"multiply(a={count}, b={factor})"])


def _organise_case(draft: Draft, rng: random.Random, folder: str, files: list[str]) -> None:
    target = rng.choice([f for f in FOLDERS if f != folder])
    name, other = rng.sample(files, 2)
    draft.add(f"In '{folder}', make a new folder called '{target}'.", [f"cd(folder={folder!r})",
                                                                      f"mkdir(dir_name={target!r})"])
    draft.add(f"Move '{name}' into '{target}'.", [f"mv(source={name!r}, destination={target!r})"])
    word = rng.choice(WORDS)
    draft.add(f"Which lines of '{other}' mention '{word}'?", [f"grep(file_name={other!r}, pattern={word!r})"])


def _write_case(draft: Draft, rng: random.Random, folder: str, files: list[str]) -> None:
    new = rng.choice([s + e for s in STEMS for e in EXTENSIONS if s + e not in files])
    text = " ".join(rng.sample(WORDS, 4))
    draft.add(f"Open the '{folder}' folder and create a file named '{new}'.", [f"cd(folder={folder!r})",
                                                                              f"touch(file_name={new!r})"])
    draft.add(f"Write '{text}' into '{new}'.", [f"echo(content={text!r}, file_name={new!r})"])
    copy = rng.choice([s + e for s in STEMS for e in EXTENSIONS if s + e not in files and s + e != new])
    draft.add(f"Copy '{new}' to '{copy}', then show me what '{copy}' says.",
              [f"cp(source={new!r}, destination={copy!r})", f"cat(file_name={copy!r})"])


def _numbers_case(draft: Draft, rng: random.Random, folder: str, files: list[str]) -> None:
    numbers = [rng.randint(2, 99) for _ in range(rng.randint(3, 6))]
    draft.add(f"What is the average of {', '.join(map(str, numbers))}?", [f"mean(numbers={numbers})"])
    draft.add("And the largest of them?", [f"max_value(numbers={numbers})"])
    places = rng.randint(1, 3)
    draft.add(f"Give me the square root of {max(numbers)} to {places} decimal places.",
              [f"square_root(number={max(numbers)}, precision={places})"])


SCENARIOS: tuple[Callable, ...] = (_count_case, _organise_case, _write_case, _numbers_case)


def parse_count(result: str) -> int:
    import json

    return int(next(v for k, v in json.loads(result).items() if k != "mode"))


def generate_cases(n: int, seed: int) -> list[dict]:
    """``n`` cases, each a scenario of two to three user turns over the file system and the calculator."""
    rng = random.Random(seed)
    cases = []
    for index in range(n):
        config, folder, files = _file_system(rng)
        draft = Draft(f"ao_calib_multi_turn_{seed}_{index}", config, ["GorillaFileSystem", "MathAPI"])
        rng.choice(SCENARIOS)(draft, rng, folder, files)
        cases.append(draft.case())
    return cases


def split_cases(cases: list[dict], test_fraction: float, validation_fraction: float, seed: int
                ) -> tuple[list[dict], list[dict], list[dict]]:
    """(train, validation, test) by case, drawn with ``seed``."""
    order = list(range(len(cases)))
    random.Random(f"split:{seed}").shuffle(order)
    n_test, n_val = round(len(cases) * test_fraction), round(len(cases) * validation_fraction)
    test, val = set(order[:n_test]), set(order[n_test:n_test + n_val])
    return ([c for i, c in enumerate(cases) if i not in test | val], [c for i, c in enumerate(cases) if i in val],
            [c for i, c in enumerate(cases) if i in test])
