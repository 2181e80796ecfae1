"""``warmup=format``'s rows: the oracle's own answers to the training questions, each given a tag (from the judge,
its kind's mean, or a spread of numbers), written to ``warmup_targets.jsonl``."""

from __future__ import annotations

import random
import statistics

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status
from ao_calib.core.errors import AOCalibError
from ao_calib.core.io import write_jsonl
from ao_calib.runs.run_dir import RunDir

from ..scoring import JudgeAnswers


def kind_means(kinds: list[str], scores: list[float | None]) -> list[float | None]:
    """Each judged score replaced by the mean score of its kind (masked scores stay None)."""
    by_kind: dict[str, list[float]] = {}
    for kind, score in zip(kinds, scores):
        if score is not None:
            by_kind.setdefault(kind, []).append(score)
    return [None if s is None else statistics.fmean(by_kind[k]) for k, s in zip(kinds, scores)]


def confidences_of(stage, kept: list[tuple[dict, str]], source: str, judge_answers: JudgeAnswers,
                   spread: list[int]) -> list[int | None]:
    """The tag's number for each kept (row, answer): 100 × the judge's score (``judge``), of its kind's mean moved by
    up to ``stage.confidence_jitter`` (``kind_mean``), or a draw from ``spread`` (``spread``); None: not judged."""
    if source not in ("judge", "kind_mean"):
        rng = random.Random(stage.seed)
        return [rng.choice(list(spread)) for _ in kept]
    infos = judge_answers([r for r, _ in kept], [a for _, a in kept])
    if source == "kind_mean":
        infos = kind_means([r["kind"] for r, _ in kept], infos)
    confidences = [None if i is None else round(100 * i) for i in infos]
    if source == "kind_mean":
        rng = random.Random(stage.seed)
        offsets = range(-stage.confidence_jitter, stage.confidence_jitter + 1, 10)
        confidences = [None if c is None else min(100, max(0, 10 * round(c / 10) + rng.choice(offsets)))
                       for c in confidences]
    return confidences


def format_targets(stage, rows: list[dict], raw: list[str], run_dir: RunDir, judge_answers: JudgeAnswers,
                   has_judge: bool, spread: list[int]) -> list[dict]:
    """The format warm-up's training rows: each non-empty own answer in ``raw`` (any tag it wrote replaced) tagged
    by ``stage.confidence`` (auto: kind_mean with a judge, else spread); ``judge_answers(rows, answers)`` scores."""
    answers = [parse_epistemic_status(text).answer.strip() for text in raw]
    kept = [(r, a) for r, a in zip(rows, answers) if a]
    source = str(getattr(stage.confidence, "value", stage.confidence))
    if source == "auto":
        source = "kind_mean" if has_judge else "spread"
    confidences = confidences_of(stage, kept, source, judge_answers, spread)
    targets = [{**r, "completion": format_epistemic_status(c, a)}
               for (r, a), c in zip(kept, confidences) if c is not None]
    if not targets:
        raise AOCalibError(f"warmup=format: none of {len(rows)} own answers could be used ({len(rows) - len(kept)} "
                           "empty, the rest not judged); check the model and the judge")
    write_jsonl(run_dir / "warmup_targets.jsonl", [
        {"question": t["question"], "completion": t["completion"], "source_prompt": t["source_prompt"]}
        for t in targets])
    tagged = [c for c in confidences if c is not None]
    print(f"[warmup:format] {len(targets)} of {len(rows)} training questions answered by the model itself and "
          f"tagged from the {source} ({len(rows) - len(kept)} empty answers, "
          f"{len(kept) - len(targets)} not judged); confidence mean {sum(tagged) / len(tagged):.1f}, "
          f"std {statistics.pstdev(tagged):.1f}", flush=True)
    return targets
