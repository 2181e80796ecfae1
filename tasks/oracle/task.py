"""task=oracle: an Activation Oracle reads a target prompt's activations and answers with its confidence."""

from __future__ import annotations

import hashlib
import logging
import random
from pathlib import Path

import datasets

from omegaconf import OmegaConf

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status, tagged_reward
from ao_calib.calibration.metrics import calibration_report
from ao_calib.errors import AOCalibError
from ao_calib.judges import JudgeContext, build_judge
from ao_calib.judges.label import yes_no
from ao_calib.rewards import RewardFn
from ao_calib.run_dir import RunDir
from ao_calib.steering.activations import (ActivationCache, ExtractionStats, PositionRule, extract_activations,
                                           layer_indices)
from ao_calib.task_api import Task, TaskData

from .classification import load_suite
from .config import OracleTaskConfig
from .data import load_labelled_rows, load_wildchat
from .generate import generate_splits
from .prompt import JUDGE_PROMPT, oracle_messages, placeholder_token_id
from .rewards import make_oracle_reward
from .steering import ActivationSteering

log = logging.getLogger(__name__)


class OracleTask(Task):
    config_class = OracleTaskConfig
    headline_metric = "correct"

    def __init__(self, cfg):
        super().__init__(cfg)
        self._steering: ActivationSteering | None = None
        self._layers: list[int] = []
        self._judge = None
        self.extraction = ExtractionStats()

    def pretrained_adapter(self) -> str | None:
        return self.cfg.model.ao_lora_id

    def steering(self) -> ActivationSteering | None:
        return self._steering

    def judge_prompt(self) -> str:
        return JUDGE_PROMPT

    def eval_variants(self) -> list[str]:
        return ["control"] if self.cfg.task.eval_control else []

    # ------------------------------------------------------------------------------------------ data

    def build_data(self, tokenizer, model) -> TaskData:
        tcfg = self.cfg.task
        train_rows, test_rows = self._rows()
        if tcfg.data.max_train_samples:
            train_rows = train_rows[: tcfg.data.max_train_samples]
        num_layers = model.config.get_text_config().num_hidden_layers
        if num_layers != self.cfg.model.num_hidden_layers:
            log.warning("model.num_hidden_layers=%d but the loaded model has %d; using %d",
                        self.cfg.model.num_hidden_layers, num_layers, num_layers)
        layers = layer_indices(num_layers, tcfg.layer_percents)
        self._layers = layers
        self._model, self._tokenizer = model, tokenizer  # judge=local grades with the base model
        store = self._extract({r["prompt"] for r in train_rows + test_rows}, tokenizer, model, layers)
        self._steering = ActivationSteering(store, placeholder_token_id(tokenizer), layer=tcfg.injection_layer,
                                            mode=self.cfg.model.steering_mode,
                                            coefficient=tcfg.steering_coefficient)
        rng = random.Random(tcfg.data.generate.seed)
        train = [self._oracle_row(r, store, layers, rng) for r in train_rows]
        test = [self._oracle_row(r, store, layers, rng) for r in test_rows]
        log.info("oracle data: %d train / %d test questions over layers %s; activations: %d texts, %d cached",
                 len(train), len(test), layers, self.extraction.texts, self.extraction.cache_hits)
        return TaskData(train=datasets.Dataset.from_list(train), test=datasets.Dataset.from_list(test))

    def _rows(self) -> tuple[list[dict], list[dict]]:
        data = self.cfg.task.data
        if data.path:
            return self._wildchat_rows()
        if data.train_path:
            if not data.test_path:
                raise AOCalibError("task.data.train_path is set: also set task.data.test_path (the held-out split)")
            return load_labelled_rows(data.train_path), load_labelled_rows(data.test_path)
        gen = data.generate
        return generate_splits(gen.n_train_prompts, gen.n_test_prompts, gen.questions_per_prompt, list(gen.kinds),
                               gen.seed)

    def _wildchat_rows(self) -> tuple[list[dict], list[dict]]:
        """WildChat prompts split into train/test by prompt; answers are unknown (None) and left to the judge."""
        data = self.cfg.task.data
        if self.cfg.judge.name in ("none", "label") or self.cfg.warmup is not None or self.cfg.trainer.name == "sft":
            raise AOCalibError("task.data.path (WildChat questions) has no reference answers: use judge=litellm or "
                               "judge=local with trainer=grpo and no warmup")
        rows = [{**r, "answer": None, "kind": r["question_type"]}
                for r in load_wildchat(data.path, strict=data.strict).to_list()]
        prompts = sorted({r["prompt"] for r in rows}, key=activation_id)  # a stable, content-keyed shuffle
        test = set(prompts[: max(1, int(len(prompts) * data.test_fraction))])
        return [r for r in rows if r["prompt"] not in test], [r for r in rows if r["prompt"] in test]

    def _extract(self, prompts: set[str], tokenizer, model, layers: list[int]) -> dict:
        acfg = self.cfg.task.activations
        rule = PositionRule(acfg.positions, k=acfg.k, window_min=acfg.window_min, window_max=acfg.window_max)
        model_id = f"{model.config._name_or_path or self.cfg.model.hub_id}:{model.dtype}"
        cache = ActivationCache(Path(self.cfg.paths.cache_dir) / "activations", model_id) if acfg.cache else None
        ordered = sorted(prompts)
        acts = extract_activations(model, tokenizer, ordered, layers, rule, batch_size=acfg.batch_size, cache=cache,
                                   stats=self.extraction)
        return {activation_id(p): a for p, a in zip(ordered, acts)}

    def _oracle_row(self, row: dict, store: dict, layers: list[int], rng: random.Random) -> dict:
        aid = activation_id(row["prompt"])
        layer = rng.choice(layers)
        confidence = rng.choice(list(self.cfg.task.sft_confidences))
        return {
            "prompt": oracle_messages(layer, len(store[aid][layer]), row["question"]),
            "completion": format_epistemic_status(confidence, row["answer"] or ""),
            "answer": row["answer"],
            "question": row["question"],
            "source_prompt": row["prompt"],
            "activation_id": aid,
            "source_layer": layer,
            "kind": row.get("kind", "labelled"),
        }

    # --------------------------------------------------------------------------------- rewards / eval

    def reward_functions(self) -> dict[str, RewardFn]:
        if self.cfg.judge.get("_target_") is None:
            raise AOCalibError("task=oracle needs a judge to score answers: judge=label (known yes/no answers) "
                               "or judge=litellm")
        if self._judge is None:
            context = JudgeContext(model=getattr(self, "_model", None), tokenizer=getattr(self, "_tokenizer", None),
                                   chat_template_kwargs=OmegaConf.to_container(self.cfg.model.chat_template_kwargs,
                                                                               resolve=True),
                                   default_prompt=self.judge_prompt())
            self._judge = build_judge(self.cfg.judge, context)
        return {"calibration": make_oracle_reward(self._judge, self.cfg.task.calibration)}

    def summary(self) -> dict:
        return {"judge": self._judge.totals()} if self._judge else {}

    def score(self, completion: str, row: dict) -> dict[str, float]:
        status = parse_epistemic_status(completion)
        if row["answer"] is None:  # WildChat rows: no reference answer, so only the format is scored here
            return {"parsed": float(status.parsed), "confidence": status.confidence / 100}
        correct = float(yes_no(status.answer) == yes_no(row["answer"]))
        return {
            "correct": correct,
            "confidence": status.confidence / 100,
            "parsed": float(status.parsed),
            "calibration_reward": tagged_reward(correct, status, self.cfg.task.calibration),
        }

    def oracle_rows(self, rows: list[dict], tokenizer, model, seed: int = 0) -> list[dict]:
        """Oracle rows (with activations extracted into the steering store) for more labelled rows: a
        classification suite, or a calibration split for a recalibration baseline."""
        self._steering.store.update(self._extract({r["prompt"] for r in rows}, tokenizer, model, self._layers))
        rng = random.Random(seed)
        return [self._oracle_row(r, self._steering.store, self._layers, rng) for r in rows]

    def extra_evaluations(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        ccfg = self.cfg.task.classification
        if not ccfg.enabled:
            return {}
        suite, skipped = load_suite(list(ccfg.datasets), ccfg.data_dir, ccfg.n_per_dataset, ccfg.seed)
        for name, reason in skipped.items():
            log.warning("classification eval: %s skipped: %s", name, reason)
        results, pooled = {}, []
        for name, rows in suite.items():
            oracle_rows = self.oracle_rows(rows, tokenizer, model, seed=ccfg.seed)
            scores = [self.score(c, r) for c, r in zip(generate(oracle_rows), oracle_rows)]
            pooled += scores
            results[name] = _calibration_of(scores)
        if pooled:
            results["overall"] = _calibration_of(pooled)
        _print_classification_table(tag, results, skipped)
        return {"classification": results, "classification_skipped": skipped}

    def aggregate(self, records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
        parse_rate = sum(r["scores"]["parsed"] for r in records) / max(len(records), 1)
        unlabelled = [r for r in records if "correct" not in r["scores"]]
        records = [r for r in records if "correct" in r["scores"]]
        if not records:  # accuracy and calibration need reference answers; see the classification suite
            return {"parse_rate": parse_rate, "unlabelled": float(len(unlabelled)), "accuracy": float("nan")}
        metrics = self.calibration_metrics(records, [r["scores"]["confidence"] for r in records],
                                           [r["scores"]["correct"] for r in records], run_dir, tag)
        metrics["parse_rate"] = parse_rate
        metrics["calibration_reward"] = sum(r["scores"]["calibration_reward"] for r in records) / len(records)
        return metrics


def _calibration_of(scores: list[dict]) -> dict[str, float]:
    metrics = calibration_report([s["confidence"] for s in scores], [s["correct"] for s in scores])
    return {**metrics, "parse_rate": sum(s["parsed"] for s in scores) / len(scores), "n": len(scores)}


def _print_classification_table(tag: str, results: dict, skipped: dict) -> None:
    lines = [f"[eval:{tag}] classification suite", f"  {'dataset':<18}{'n':>6}{'acc':>8}{'AUROC':>8}{'ECE':>8}{'MCE':>8}{'Brier':>8}"]
    for name, m in results.items():
        lines.append(f"  {name:<18}{m['n']:>6}{m['accuracy']:>8.3f}{m['auroc']:>8.3f}{m['ece']:>8.3f}{m['mce']:>8.3f}{m['brier']:>8.3f}")
    lines += [f"  {name:<18} skipped: {reason}" for name, reason in skipped.items()]
    print("\n".join(lines), flush=True)


def activation_id(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:16]
