"""The classical confidences the stated one must beat, written beside a held-out evaluation: the oracle's own answer
probability, Platt-scaled on the validation split (``task.baselines_logprob_platt``) or raw, and the suite of
``task.baselines_suite`` (mode share, the warm-up's number, the text-only rule, a linear probe)."""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from ao_calib.core.io import write_jsonl
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed

from ..build import OracleBuild
from ..config import OracleTaskConfig
from ..rows.oracle import activation_id, asks_yes_no
from ..scoring import scores_held_out_rows

log = logging.getLogger(__name__)


@dataclass
class Baselines:
    """One evaluation's baselines: the task's settings and build, the evaluation's sample seed, the chat template's
    arguments, and ``score(completions, rows)`` (the task's scoring)."""

    config: OracleTaskConfig
    built: OracleBuild
    eval_seed: int
    data_seed: int
    chat_template_kwargs: dict
    score: Callable[[list[str], list[dict]], list[dict]]

    def answer_probability(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        """``task.baselines_logprob_platt`` beside a held-out evaluation (``scores_held_out_rows``): Platt-scaled
        on a run scoring the test split (with a validation split to fit on), raw on a run scoring the validation
        split; nothing otherwise."""
        split = "test" if self.config.data.test_path else self.config.data.eval_split  # a file: not validation
        if (not scores_held_out_rows(tag) or not self.config.baselines_logprob_platt
                or not (split == "validation" or (split == "test" and self.built.validation_rows))):
            return {}
        name = "logprob" if split == "validation" else "logprob_platt"
        if distributed.is_distributed() and distributed.sharded():
            log.warning("baselines.%s: skipped under a sharded model (it scores on the main process)", name)
            return {}
        if split == "validation":
            return self.logprob_on_validation(model, tokenizer, run_dir, tag)
        return self.logprob_platt(model, tokenizer, generate, run_dir, tag)

    def logprob_platt(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        """The oracle's probability of its own answer (``probabilities.own_answer_probabilities``), Platt-scaled on the
        validation split (the oracle's own answers there, scored against their labels). Written into every row of
        the evaluation's own-condition predictions file as ``baselines.logprob_platt``, with its AUROC and ECE in
        the report. The fit takes at most as many validation rows as the evaluation scored (``eval.num_samples``,
        ``ao_calib.eval``'s num_samples), drawn with eval.seed as the evaluation draws its own: a smoke run of 8
        samples does not generate the whole validation split."""
        from ao_calib.calibration.metrics import auroc, expected_calibration_error, within_group_auroc
        from ao_calib.calibration.recalibration import PlattScaling
        from ao_calib.evaluation.evaluate import held_out_sample

        from .probabilities import own_answer_probabilities

        built = self.built
        # a statement the evaluation scores (a held-out file may hold validation rows) is never fitted on
        scored = {r["activation_id"] for r in built.test_rows}
        # (a yes/no answer's probability: a row whose answer is a class has none)
        fit_rows = [r for r in built.validation_rows if asks_yes_no(r)]
        total = len(fit_rows)
        fit_rows = [r for r in fit_rows if activation_id(r["prompt"]) not in scored]
        scored_too = total - len(fit_rows)
        if scored_too:
            log.warning("baselines.logprob_platt: %d of the %d validation rows are among the rows scored; fitted on "
                        "the other %d", scored_too, total, len(fit_rows))
        scored_rows = distributed.on_main(lambda: len(run_dir.predictions(tag).read_text().splitlines()))
        fit_rows = [fit_rows[i] for i in held_out_sample(len(fit_rows), scored_rows, self.eval_seed)]
        if not fit_rows:
            return {}
        # every process extracts (the disk cache makes it once) and generates its share; the main one scores
        built.steering.store.update(built.extract({r["prompt"] for r in fit_rows}, model, tokenizer))
        rng = random.Random(self.data_seed + 1)
        validation = built.rows_of(fit_rows, [built.draw(rng) for _ in fit_rows])
        completions = generate(validation, desc=f"{tag}/validation (Platt fit)")

        def fit_and_apply() -> dict:
            correct = [s["correct"] for s in self.score(completions, validation)]
            if len(set(correct)) < 2:
                log.warning("baselines.logprob_platt: the %d validation answers are all right or all wrong; skipped "
                            "(baselines.logprob written raw)", len(correct))
                return self.logprob_on_validation(model, tokenizer, run_dir, tag, on_main=False)
            fit = PlattScaling.fit(own_answer_probabilities(model, tokenizer, validation, completions,
                                                            built.steering,
                                                            chat_template_kwargs=dict(self.chat_template_kwargs)),
                                   correct)
            found = self.predictions_probabilities(model, tokenizer, run_dir, tag, "logprob_platt")
            if found is None:
                return {}
            path, records, probabilities = found
            kept = [i for i, p in enumerate(probabilities) if p is not None]
            platt = fit([probabilities[i] for i in kept]).tolist()
            for i, p_platt in zip(kept, platt):
                records[i]["baselines"] = {"logprob": probabilities[i], "logprob_platt": p_platt}
            write_jsonl(path, records)
            hits = [records[i]["scores"]["correct"] for i in kept]
            questions = [records[i]["question"] for i in kept]
            report = {"auroc": auroc(platt, hits), "ece": expected_calibration_error(platt, hits),
                      "auroc_within_question": within_group_auroc(platt, hits, questions),
                      "platt": {"a": fit.a, "b": fit.b}, "validation_rows": len(validation),
                      "validation_rows_scored_too": scored_too,
                      "validation_accuracy": sum(correct) / len(correct)}
            print(f"[eval:{tag}] baseline: own-answer probability, Platt-scaled on {len(validation)} validation "
                  f"rows: AUROC {report['auroc']:.3f}, within-question AUROC {report['auroc_within_question']:.3f}, "
                  f"ECE {report['ece']:.3f}", flush=True)
            return {"baselines": {"logprob_platt": report}}

        return distributed.on_main(fit_and_apply)

    def predictions_probabilities(self, model, tokenizer, run_dir: RunDir, tag: str, name: str):
        """(path, records, probabilities): the evaluation's own-condition predictions rows and the oracle's own
        probability of each yes/no row's answer (None on a row answered by a class), read off the model on the rows
        the evaluation drew (a sample of eval.num_samples, in file order, not the first ones); None, with a warning
        naming ``baselines.<name>``, when the file's rows are not those."""
        from ao_calib.evaluation.evaluate import rows_of_records

        from .probabilities import own_answer_probabilities

        path = run_dir.predictions(tag)
        records = [json.loads(line) for line in path.read_text().splitlines()]
        rows = rows_of_records(self.built.test_rows, records, self.eval_seed, ("source_id", "question"))
        if rows is None:
            log.warning("baselines.%s: skipped: the predictions rows of %s are not the rows this evaluation drew",
                        name, path)
            return None
        asked = [i for i, row in enumerate(rows) if asks_yes_no(row)]
        found = own_answer_probabilities(model, tokenizer, [rows[i] for i in asked],
                                         [records[i]["completion"] for i in asked], self.built.steering,
                                         chat_template_kwargs=dict(self.chat_template_kwargs))
        probabilities: list[float | None] = [None] * len(rows)
        for i, p in zip(asked, found):
            probabilities[i] = p
        return path, records, probabilities

    def logprob_on_validation(self, model, tokenizer, run_dir: RunDir, tag: str, on_main: bool = True) -> dict:
        """A run that evaluates on the validation split (choosing settings) has nothing to fit Platt's map on but
        the rows it scores, so it writes the oracle's own answer probability raw, as ``baselines.logprob`` in every
        own-condition row, with its AUROC in eval.json: Platt's map is increasing, so the raw probability ranks the
        rows as the Platt-scaled one would, and the bar "AUROC above the Platt baseline's" can be checked on
        validation from the rows."""
        from ao_calib.calibration.metrics import auroc, within_group_auroc

        def score() -> dict:
            found = self.predictions_probabilities(model, tokenizer, run_dir, tag, "logprob")
            if found is None:
                return {}
            path, records, probabilities = found
            kept = [i for i, p in enumerate(probabilities) if p is not None]
            for i in kept:
                records[i]["baselines"] = {"logprob": probabilities[i]}
            write_jsonl(path, records)
            hits = [records[i]["scores"]["correct"] for i in kept]
            own = [probabilities[i] for i in kept]
            report = {"auroc": auroc(own, hits),
                      "auroc_within_question": within_group_auroc(own, hits, [records[i]["question"] for i in kept])}
            print(f"[eval:{tag}] baseline: own-answer probability (raw; Platt is fitted on test-split runs only): "
                  f"AUROC {report['auroc']:.3f}, within-question AUROC {report['auroc_within_question']:.3f}",
                  flush=True)
            return {"baselines": {"logprob": report}}

        return distributed.on_main(score) if on_main else score()

    def suite(self, model, tokenizer, run_dir: RunDir, tag: str) -> dict:
        """``task.baselines_suite``: the mode share, the warm-up's number, the text-only rule and the probe
        (``methods``) written into every own-condition row of the evaluation, with their pooled
        figures for eval.json."""
        from ao_calib.evaluation.evaluate import rows_of_records

        from . import methods as cb

        if distributed.is_distributed() and distributed.sharded():
            log.warning("task.baselines_suite: skipped under a sharded model (it scores on the main process)")
            return {}
        built = self.built

        def run() -> dict:
            path = run_dir.predictions(tag)
            records = [json.loads(line) for line in path.read_text().splitlines()]
            rows = rows_of_records(built.test_rows, records, self.eval_seed, cb.JOIN)
            if rows is None:
                log.warning("task.baselines_suite: skipped: the rows of %s are not those this evaluation drew", path)
                return {}
            distributions = cb.outcome_distributions(model, tokenizer, rows, [r["completion"] for r in records],
                                                     built.steering,
                                                     chat_template_kwargs=dict(self.chat_template_kwargs))
            cb.add_to_records(records, "mode", *cb.mode_baseline(distributions, [r["answer"] for r in rows],
                                                                  self.config.baselines_mode_k))
            cb.add_to_records(records, "warmup", *cb.warmup_baseline(run_dir, records))
            cb.add_to_records(records, "text_rule", cb.text_rule(records))
            cb.add_to_records(records, "probe", *cb.probe_baseline_rows(
                built.steering.store, built.train_rows, rows, built.layers, activation_id,
                self.config.baselines_probe_c, self.data_seed))
            write_jsonl(path, records)
            report = cb.pooled_report(records, ["mode", "warmup", "text_rule", "probe"])
            print(f"[eval:{tag}] baselines (task.baselines_suite): " + ", ".join(
                f"{name} AUROC {m['auroc']:.3f} ECE {m['ece']:.3f}" for name, m in report.items()), flush=True)
            return report

        return distributed.on_main(run)
