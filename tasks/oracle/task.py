"""task=oracle: an Activation Oracle reads a target prompt's activations and answers with its confidence."""

from __future__ import annotations

import hashlib
import json
import logging
import random
import re
import statistics
from pathlib import Path

import datasets
import torch

from ao_calib.runtime import distributed
from ao_calib.calibration import format_epistemic_status, parse_epistemic_status, scored_confidence, tagged_reward
from ao_calib.calibration.contract import CONFIDENCE_INSTRUCTION
from ao_calib.calibration.metrics import CORRECT_AT, calibration_report
from ao_calib.core.errors import AOCalibError
from ao_calib.judges import JudgeContext, JudgeItem, build_judge, judge_now
from ao_calib.core.io import write_jsonl
from ao_calib.judges.label import yes_no
from ao_calib.rewards import RewardFn
from ao_calib.runs.run_dir import RunDir
from ao_calib.steering.activations import ActivationCache, ExtractionStats, extract_activations, layer_indices
from ao_calib.task_api import (Task, TaskContext, TaskData, TaskRequirements, calibration_figure_names,
                               calibration_figures)

from .baselines import ANSWERS
from .classification import load_suite
from .classification_source import classification_splits
from .classification_source import summary as classification_summary
from .config import OracleTaskConfig
from .data import load_labelled_rows, load_wildchat
from .held_out import load_held_out_rows
from .generate import NOT_STATED, generate_splits_for, open_question
from .prompt import JUDGE_PROMPT, oracle_messages, placeholder_token_id
from .rewards import make_oracle_reward
from .steering import ActivationSteering, noise_like, pair_controls, position_rule

log = logging.getLogger(__name__)
# activation ids of the training rows that inject random vectors (task.rl_none_fraction)
NONE_ID_PREFIX = "none:"


def checked_against_reference(row: dict) -> bool:
    """The oracle's scoring rule. A row whose reference answer is yes/no is checked against it: correct when the
    answer after the tag opens with the same yes/no (``yes_no``), wrong otherwise (another word, no answer). Any
    other row is scored by the judge's informativeness (correct at ``CORRECT_AT`` and above): one without a
    reference (WildChat, ``task.data.withhold_answers``) and one whose reference is open (a fact such as
    "positive"), whose answers are never compared as text: two answers that are neither yes nor no are not thereby
    the same answer."""
    return row["answer"] is not None and yes_no(row["answer"]) is not None


def answers_drawn_from(row: dict, unreadable: bool) -> list[str]:
    """The answers a row's label was drawn from as far as the oracle can tell (``answer_drawn_from``): on a row it
    cannot read, a yes/no label is Yes or No with probability 1/2 each (``make_question``); [] otherwise."""
    return list(ANSWERS) if unreadable and row["answer"] in ANSWERS else []


class OracleTask(Task):
    config_class = OracleTaskConfig
    headline_metric = "correct"
    prediction_columns = ("question", "kind", "source_id", "readable", "dataset", "in_distribution")
    injects_activations = True

    def __init__(self, config: OracleTaskConfig, context: TaskContext):
        super().__init__(config, context)
        self._validation_rows: list[dict] = []  # generated data's validation split (raw rows), for baselines
        self._center: dict[int, torch.Tensor] = {}  # task.activations.center: the training mean per layer
        self._test_rows: list[dict] = []
        self._steering: ActivationSteering | None = None
        self._layers: list[int] = []
        self._judge = None
        self.extraction = ExtractionStats()
        if config.data.train_path and not config.data.test_path:
            raise AOCalibError("task.data.train_path is set: also set task.data.test_path (the held-out split)")
        # read and checked here, so that a bad held-out file is refused before any model loads
        self._held_out_file = (load_held_out_rows(config.data.test_path, all_paraphrases=config.data.classification
                                                  .all_paraphrases) if config.data.test_path else None)
        self._train_rows: list[dict] = []  # the training rows (raw), for the probe baseline
        for key in ("rl_none_fraction", "rl_unreadable_fraction", "rl_expected_over_draw", "rl_reserved_prompts"):
            if getattr(config, key) and context.stages and context.stages[-1] == "sft":
                # checked here, before any model loads: SFT would imitate coin-flip labels
                raise AOCalibError(f"task.{key}={getattr(config, key)} shapes the rows of an RL stage, but the main "
                                   f"stage is trainer=sft; set task.{key}=0 or use an RL trainer")
        if config.rl_reserved_prompts and context.stages and len(context.stages) < 2:
            raise AOCalibError(f"task.rl_reserved_prompts={config.rl_reserved_prompts} keeps prompts from a warm-up "
                               f"for the RL stage, and this run's stages are {list(context.stages)}: add a warm-up "
                               "or set it to 0")
        if config.sft_none_fraction and context.stages and not (len(context.stages) > 1
                                                               and context.stages[0] == "sft"):
            raise AOCalibError(f"task.sft_none_fraction={config.sft_none_fraction} adds rows to an SFT warm-up, and "
                               f"this run's stages are {list(context.stages)}: use warmup=sft or set it to 0")

    @property
    def data_seed(self) -> int:
        """The generator's seed: ``task.data.generate.seed`` when set, else the run's ``trainer.seed``."""
        return self.context.seed_or(self.config.data.generate.seed)

    def requirements(self, need_adapter: bool = True) -> TaskRequirements:
        """The pretrained oracle adapter (a stand-in built here for a tiny model) and WildChat's hub data set."""
        adapter = None
        if need_adapter and self.config.stand_in.enabled:
            from .stand_in import ensure_stand_in_oracle

            adapter = str(ensure_stand_in_oracle(self.config, self.context))
        elif need_adapter:
            adapter = self.context.model.ao_lora_id
        path = self.config.data.path
        return TaskRequirements(adapter=adapter, hub_datasets=(path,) if path and not Path(path).exists() else ())

    def judge_prompt(self) -> str:
        return JUDGE_PROMPT

    # ------------------------------------------------------------------------------------------ data

    def build_data(self, tokenizer, model) -> TaskData:
        tcfg = self.config
        train_rows, own_rows = self._rows()
        if tcfg.data.max_train_samples:
            train_rows = train_rows[: tcfg.data.max_train_samples]
        self._train_rows = train_rows
        test_rows = own_rows if self._held_out_file is None else self._held_out_file
        if tcfg.data.withhold_answers:  # (the training rows lose theirs in _rows)
            test_rows = [{**r, "answer": None} for r in test_rows]
        num_layers = model.config.get_text_config().num_hidden_layers
        if num_layers != self.context.model.num_hidden_layers:
            log.warning("model.num_hidden_layers=%d but the loaded model has %d; using %d",
                        self.context.model.num_hidden_layers, num_layers, num_layers)
        layers = layer_indices(num_layers, tcfg.layer_percents)
        self._layers = layers
        self._model, self._tokenizer = model, tokenizer  # judge=local grades with the base model
        store = self._extract({r["prompt"] for r in train_rows + test_rows}, tokenizer, model, layers)
        if tcfg.activations.center:
            # the mean over the training prompts' vectors, per layer (the training split only), taken off every
            # vector the oracle reads, now and in later extractions (validation, classification suites)
            train_ids = {activation_id(r["prompt"]) for r in train_rows}
            self._center = {layer: torch.cat([store[aid][layer].float() for aid in train_ids]).mean(0)
                            for layer in layers}
            store = {aid: self._centered(vectors) for aid, vectors in store.items()}
        self._steering = ActivationSteering(store, placeholder_token_id(tokenizer), layer=tcfg.injection_layer,
                                            mode=self.context.model.steering_mode,
                                            coefficient=tcfg.steering_coefficient)
        rng = random.Random(self.data_seed)
        train_draws = [self._draw(rng) for _ in train_rows]
        train = pair_controls([self._oracle_row(r, store, d) for r, d in zip(train_rows, train_draws)])
        test_draws = self._held_out_draws(rng, train_rows, train_draws, own_rows, test_rows)
        test = pair_controls([self._oracle_row(r, store, d) for r, d in zip(test_rows, test_draws)], fallback=train)
        self._test_rows = test
        log.info("oracle data: %d train / %d test questions%s over layers %s; activations: %d texts, %d cached",
                 len(train), len(test), f" (task.data.test_path={tcfg.data.test_path})" if tcfg.data.test_path else "",
                 layers, self.extraction.texts, self.extraction.cache_hits)
        conditions = (("control",) if tcfg.eval_control else ()) + (("none",) if tcfg.eval_none else ())
        return TaskData(train=datasets.Dataset.from_list(train), test=datasets.Dataset.from_list(test),
                        steering=self._steering, conditions=conditions)

    def _held_out_draws(self, rng: random.Random, train_rows: list[dict], train_draws: list[tuple[int, int]],
                        own_rows: list[dict] | None, test_rows: list[dict]) -> list[tuple[int, int]]:
        """Each held-out row's layer and confidence: drawn after the training rows' from the data seed; for the
        rows of a held-out file (``task.data.test_path``) that replaces the run's own held-out split, the draws the
        run gave the same question about the same prompt in its own splits, so that such a row is asked exactly as
        there (the same vectors), and a draw seeded by the data seed and the row for the others."""
        if own_rows is None:  # task.data.train_path: the file is the run's own held-out split
            return [self._draw(rng) for _ in test_rows]
        own_draws = [self._draw(rng) for _ in own_rows]
        if self._held_out_file is None:
            return own_draws
        asked = {(r["prompt"], r["question"]): d for r, d in zip(train_rows + own_rows, train_draws + own_draws)}
        return [asked.get((r["prompt"], r["question"]))
                or self._draw(random.Random(f"test_path:{self.data_seed}:{r['prompt']}:{r['question']}"))
                for r in test_rows]

    def _rows(self) -> tuple[list[dict], list[dict] | None]:
        """The training rows and the run's own held-out split (None with ``task.data.train_path``, whose held-out
        rows are ``task.data.test_path``'s)."""
        data = self.config.data
        if data.path:
            train, test = self._wildchat_rows()
        elif data.train_path:
            train, test = load_labelled_rows(data.train_path, "the training file (task.data.train_path)"), None
        elif data.classification.enabled:
            splits = classification_splits(data.classification, self.context.seed_or(data.classification.seed))
            log.info("oracle data (task.data.classification): %s", classification_summary(splits))
            train, self._validation_rows = splits["train"], splits["validation"]
            test = splits["validation"] if data.eval_split == "validation" else splits["test"]
        else:
            splits = generate_splits_for(data.generate, self.data_seed)
            train, test = splits[0], splits[-1]
            self._validation_rows = splits[1] if len(splits) == 3 else []
            if data.eval_split == "validation":
                test = splits[1]
                if not data.test_path:
                    log.info("oracle data: evaluating on the validation split (%d rows); the test split is unused",
                             len(test))
        if data.withhold_answers:
            train = [{**r, "answer": None} for r in train]
        if train and train[0]["answer"] is None:
            self._check_judge_only_setup()
        return train, test

    def _check_judge_only_setup(self) -> None:
        """Rows without reference answers (WildChat, or task.data.withhold_answers) are scored by a judge alone."""
        judge = self.context.judge
        if judge is None or judge.name == "label":
            raise AOCalibError(f"task.data: these questions have no reference answers, so "
                               f"judge={'none' if judge is None else judge.name} cannot score them: use "
                               "judge=litellm (or judge=local)")
        if "sft" in self.context.stages:  # an SFT trainer or warm-up (the format warm-up is named "format")
            raise AOCalibError("task.data: these questions have no reference answers to imitate: use "
                               "warmup=format (the oracle's own answers, tagged) and an RL trainer, not SFT")

    def main_stage_data(self, stage, data: TaskData) -> TaskData:
        """The RL stage's rows: the training rows (of the prompts ``task.rl_reserved_prompts`` keeps for it, when
        set), with ``task.rl_unreadable_fraction`` of them about unstated facts (readable rows left out at random to
        make that share) and ``task.rl_none_fraction`` of copies injecting random vectors. The warm-up sees none of
        the copies."""
        shaped = ("rl_none_fraction", "rl_unreadable_fraction", "rl_expected_over_draw", "rl_reserved_prompts")
        if not any(getattr(self.config, key) for key in shaped):
            return data
        train = self._with_unreadable_share(self._prompts_of_stage(data.train.to_list(), rl=True))
        train += self._none_rows(train, self._steering.store, self.config.rl_none_fraction, "rl_none")
        if self.config.rl_expected_over_draw:  # the reward takes its expectation over the label's draw
            train = [{**row, "answer_drawn_from": answers_drawn_from(row, row.get("readable") is False)}
                     for row in train]
            drawn = sum(bool(r["answer_drawn_from"]) for r in train)
            (log.info if drawn else log.warning)(
                "RL training rows: %d of %d scored against both answers their label could have been "
                "(task.rl_expected_over_draw)%s", drawn, len(train),
                "" if drawn else ": no yes/no row is marked unreadable (readable: false), so the key changes nothing")
        return data.with_train(datasets.Dataset.from_list(train))

    def _prompts_of_stage(self, train: list[dict], rl: bool) -> list[dict]:
        """``task.rl_reserved_prompts``: the training rows of the prompts kept for the RL stage (``rl``), or of the
        others (the warm-up's); every row when the share is 0. Whole prompts, drawn by the data seed, so that no
        prompt the warm-up fitted reaches the RL stage."""
        share = self.config.rl_reserved_prompts
        if not share:
            return train
        prompts = sorted({row["source_id"] for row in train})
        reserved = set(random.Random(f"rl_reserved:{self.data_seed}").sample(prompts, round(len(prompts) * share)))
        kept = [row for row in train if (row["source_id"] in reserved) == rl]
        if not kept:
            raise AOCalibError(f"task.rl_reserved_prompts={share} leaves the {'RL stage' if rl else 'warm-up'} no "
                               f"training prompt of {len(prompts)}")
        log.info("%s: %d training rows of %d of the %d training prompts (task.rl_reserved_prompts)",
                 "RL stage" if rl else "warm-up", len(kept), len(reserved) if rl else len(prompts) - len(reserved),
                 len(prompts))
        return kept

    def _with_unreadable_share(self, train: list[dict]) -> list[dict]:
        """``task.rl_unreadable_fraction``: every row about an unstated fact (``readable`` false) and as many of the
        others, drawn by the data seed, as make that share; all rows when the share is already there."""
        share = self.config.rl_unreadable_fraction
        if not share:
            return train
        unreadable = [i for i, row in enumerate(train) if row.get("readable") is False]
        if not unreadable:
            raise AOCalibError(f"task.rl_unreadable_fraction={share}: no training row is marked unreadable "
                               "(readable: false, generated data with task.data.generate.stated_fraction < 1)")
        readable = [i for i in range(len(train)) if train[i].get("readable") is not False]
        keep = min(len(readable), round(len(unreadable) * (1 - share) / share))
        kept = set(unreadable) | set(random.Random(f"rl_unreadable:{self.data_seed}").sample(readable, keep))
        log.info("RL training rows: %d about unstated facts, %d of %d readable ones (task.rl_unreadable_fraction)",
                 len(unreadable), keep, len(readable))
        return [row for i, row in enumerate(train) if i in kept]

    def _none_rows(self, train: list[dict], store: dict, fraction: float, key: str) -> list[dict]:
        """``task.rl_none_fraction`` / ``task.sft_none_fraction`` (``key``): copies of training rows whose activation
        id names random vectors of the norms of the row's own (added to ``store``), so that they make that share of
        the training rows."""
        if not fraction:
            return []
        rng = random.Random(f"{key}:{self.data_seed}")
        picked = rng.sample(train, round(len(train) * fraction / (1 - fraction)))
        rows = []
        for row in picked:
            aid = NONE_ID_PREFIX + row["activation_id"]
            layer = int(row["source_layer"])
            store.setdefault(aid, {})[layer] = noise_like(store[row["activation_id"]][layer], f"train:{aid}:{layer}")
            rows.append({**row, "activation_id": aid, "readable": False})  # nothing to read: a coin-flip row
        log.info("%s training rows: %d of %d carry random vectors in place of activations (task.%s_fraction)",
                 "RL" if key == "rl_none" else "warm-up", len(rows), len(train) + len(rows), key)
        return rows

    def _wildchat_rows(self) -> tuple[list[dict], list[dict]]:
        """WildChat prompts split into train/test by prompt; answers are unknown (None) and left to the judge."""
        data = self.config.data
        rows = [{**r, "answer": None, "kind": r["question_type"]}
                for r in load_wildchat(data.path, strict=data.strict).to_list()]
        prompts = sorted({r["prompt"] for r in rows}, key=activation_id)  # a stable, content-keyed shuffle
        test = set(prompts[: max(1, int(len(prompts) * data.test_fraction))])
        return [r for r in rows if r["prompt"] not in test], [r for r in rows if r["prompt"] in test]

    def _extract(self, prompts: set[str], tokenizer, model, layers: list[int]) -> dict:
        acfg = self.config.activations
        rule = position_rule(acfg)
        model_id = f"{model.config._name_or_path or self.context.model.hub_id}:{model.dtype}"
        cache = ActivationCache(Path(self.context.cache_dir) / "activations", model_id) if acfg.cache else None
        ordered = sorted(prompts)
        acts = extract_activations(model, tokenizer, ordered, layers, rule, batch_size=acfg.batch_size, cache=cache,
                                   stats=self.extraction)
        return {activation_id(p): self._centered(a) for p, a in zip(ordered, acts)}

    def _centered(self, vectors: dict) -> dict:
        """``vectors`` less the training mean of their layer (``task.activations.center``); as they are without it."""
        if not self._center:
            return vectors
        return {layer: (v.float() - self._center[layer]).to(v.dtype) for layer, v in vectors.items()}

    def _draw(self, rng: random.Random) -> tuple[int, int]:
        """A row's source layer and the confidence of its warm-up target, drawn from ``rng`` in that order."""
        return rng.choice(self._layers), rng.choice(list(self.config.sft_confidences))

    def _oracle_row(self, row: dict, store: dict, draw: tuple[int, int]) -> dict:
        aid = activation_id(row["prompt"])
        layer, confidence = draw
        question = row["question"] + (CONFIDENCE_INSTRUCTION if self.config.prompt.confidence_instruction else "")
        return {
            "prompt": oracle_messages(layer, len(store[aid][layer]), question),
            "completion": format_epistemic_status(confidence, row["answer"] or ""),
            "answer": row["answer"],
            "question": row["question"],
            "source_prompt": row["prompt"],
            "activation_id": aid,
            "source_id": aid,  # the target prompt's id: rows of one prompt share it (splits never do)
            "source_layer": layer,
            "kind": row.get("kind", "labelled"),
            **({"readable": row["readable"]} if "readable" in row else {}),
            **({"fact": row["fact"]} if "fact" in row else {}),
            **{key: row[key] for key in ("dataset", "in_distribution", "question_group") if key in row},
        }

    # --------------------------------------------------------------------------------- rewards / eval

    def confidence_scale(self) -> list[int]:
        """The numbers the warm-up teaches the oracle to state (``task.sft_confidences``)."""
        return list(self.config.sft_confidences)

    def judge(self):
        """The run's judge (built once; judge=local grades with the base model)."""
        if self.context.judge is None:
            raise AOCalibError("task=oracle needs a judge to score answers: judge=label (known yes/no answers) "
                               "or judge=litellm")
        if self._judge is None:
            context = JudgeContext(model=getattr(self, "_model", None), tokenizer=getattr(self, "_tokenizer", None),
                                   chat_template_kwargs=dict(self.context.model.chat_template_kwargs),
                                   default_prompt=self.judge_prompt())
            self._judge = build_judge(self.context.judge, context)
        return self._judge

    def reward_functions(self) -> dict[str, RewardFn]:
        return {"calibration": make_oracle_reward(self.judge(), self.config.calibration)}

    def summary(self) -> dict:
        return {"judge": self._judge.totals()} if self._judge else {}

    def score_one(self, completion: str, row: dict) -> dict[str, float]:
        """One completion of a row with a yes/no reference answer, against it (``checked_against_reference``)."""
        if not checked_against_reference(row):
            raise ValueError(f"score_one: the reference {row['answer']!r} is not yes/no; such a row is judged")
        status = parse_epistemic_status(completion)
        correct = float(yes_no(status.answer) == yes_no(row["answer"]))
        return {
            "correct": correct,
            "confidence": status.confidence / 100 if status.parsed else None,  # null: no tag, counted as 0.5
            "parsed": float(status.parsed),
            "calibration_reward": tagged_reward(correct, status, self.config.calibration),
        }

    def score(self, completions: list[str], rows: list[dict]) -> list[dict[str, float]]:
        """Each row by the rule ``checked_against_reference`` names: a yes/no reference answer is checked against
        the yes/no the answer opens with; every other row (no reference, as WildChat's, or an open one) is scored
        by the judge, in one batched call through its cache, so re-evaluating the same answers costs no judge call.
        A masked judgment (judge=label on an open reference, a failed call) leaves the sample out of the
        calibration figures and is counted (``judge_failed``)."""
        judged = [i for i, r in enumerate(rows) if not checked_against_reference(r)]
        scores = [self.score_one(c, r) if checked_against_reference(r) else None for c, r in zip(completions, rows)]
        if not judged:
            return scores
        statuses = {i: parse_epistemic_status(completions[i]) for i in judged}
        infos = self.judge_answers([rows[i] for i in judged], [statuses[i].answer for i in judged])
        for i, info in zip(judged, infos):
            status = statuses[i]
            base = {"confidence": status.confidence / 100 if status.parsed else None, "parsed": float(status.parsed)}
            if info is None:
                scores[i] = {**base, "judge_failed": 1.0}
            else:
                scores[i] = {**base, "informativeness": info, "correct": float(info >= CORRECT_AT),
                             "calibration_reward": tagged_reward(info, status, self.config.calibration),
                             "judge_failed": 0.0}
        return scores

    def judge_answers(self, rows: list[dict], answers: list[str]) -> list[float | None]:
        """The judge's informativeness of each answer to its row's question, outside training (evaluation, the
        format warm-up); the judge's counters for this call are logged, not carried into a training step."""
        judge = self.judge()
        items = [JudgeItem(prompt=r["source_prompt"], question=r["question"], answer=a, label=r["answer"])
                 for r, a in zip(rows, answers)]
        infos = judge_now(judge, items)
        stats = judge.pop_step_stats()
        failed = sum(i is None for i in infos)
        if failed:
            log.warning("judge: %d of %d answers could not be judged (%s); they are left out of the figures",
                        failed, len(infos), ", ".join(f"{k} {v:g}" for k, v in stats.items()))
        return infos

    # --------------------------------------------------------------------------------------- warm-up

    def warmup_data(self, stage, model, tokenizer, data: TaskData, run_dir: RunDir) -> TaskData:
        """The rows of the prompts ``task.rl_reserved_prompts`` leaves to the warm-up (all when 0), and then
        ``warmup=sft``: the training rows, or only the readable ones (``task.sft_readable_only``), plus copies that
        inject random vectors (``task.sft_none_fraction``).
        ``warmup=format``: the oracle answers the training questions itself (greedy, activations injected);
        each answer keeps its words and gets a tag: 100 × the judge's mean informativeness of the own answers of
        its kind (``confidence=kind_mean``, a calibrated start, moved by up to ``confidence_jitter`` so that groups
        differ), of that answer alone (``judge``), or a draw from
        ``task.sft_confidences`` (``spread``). The targets are written to
        ``warmup_targets.jsonl`` in the run directory."""
        if self.config.rl_reserved_prompts:
            data = data.with_train(datasets.Dataset.from_list(self._prompts_of_stage(data.train.to_list(), rl=False)))
        if stage.name != "format":
            train = data.train
            if self.config.sft_readable_only:
                # with sft_open_unstated the unstated rows stay, each to be asked openly ("not stated")
                keep_unstated = self.config.sft_open_unstated or self.config.sft_unstated_tag_only
                train = train.filter(lambda row: keep_unstated or row.get("readable") is not False,
                                     desc="readable warm-up rows")
                log.info("warm-up: %d of %d training rows hold their answer in the prompt (task.sft_readable_only)",
                         sum(row.get("readable") is not False for row in train), len(data.train))
            if self.config.sft_none_fraction:
                rows = train.to_list()
                rows += self._none_rows(rows, self._steering.store, self.config.sft_none_fraction, "sft_none")
                train = datasets.Dataset.from_list(rows)
            if self.config.sft_open_fraction or self.config.sft_open_unstated:
                train = self._with_open_questions(train)
            if self.config.sft_unstated_tag_only or self.config.sft_none_fraction:
                # a coin-flip label teaches nothing to read; the row's tag (and its number) still learns from it
                # warmup.calibration_expected_over_draw may take c's expectation over the label's draw
                # two columns added, not a Dataset.map: map fingerprints its function by pickling what it closes
                # over, here the task and its activation store (20-35 s of the quickstart's set-up on a 2-core CPU)
                rows = train.to_list()  # one pass over the Arrow table, not one per column
                coins = [self._answer_is_a_coin_flip(row) for row in rows]
                columns = {"answer_in_loss": [not coin for coin in coins],
                           "answer_drawn_from": [answers_drawn_from(row, coin) for row, coin in zip(rows, coins)]}
                train = train.remove_columns([name for name in columns if name in train.column_names])
                for name, values in columns.items():
                    train = train.add_column(name, values)
                log.info("warm-up: %d rows keep their answer out of the loss (unstated facts: "
                         "task.sft_unstated_tag_only; random vectors: task.sft_none_fraction)",
                         train["answer_in_loss"].count(False))
            return data if train is data.train else data.with_train(train)
        from ao_calib.evaluation.generation import generate_completions

        rows = data.train.to_list()[: stage.num_questions or None]
        raw = distributed.map_split(lambda share: generate_completions(
            model, tokenizer, share, chat_template_kwargs=dict(self.context.model.chat_template_kwargs), max_new_tokens=stage.max_new_tokens,
            batch_size=stage.generation_batch_size, steering=self._steering, desc="format warm-up: own answers"), rows)
        # Judged, written and printed once; every process trains on the same targets.
        targets = distributed.on_main(lambda: self._format_targets(stage, rows, raw, run_dir))
        return data.with_train(datasets.Dataset.from_list(targets))

    def _with_open_questions(self, train: datasets.Dataset) -> datasets.Dataset:
        """``task.sft_open_fraction`` of the rows with a known fact, asked as an open question whose target answer
        is the fact (the same activations, layer and drawn confidence); the choice of rows and wordings is seeded by
        the data seed, so every run on the same data asks the same ones."""
        rng = random.Random(f"open:{self.data_seed}")
        # an unstated fact's row is always asked openly (its yes/no label is a coin flip), worded from its own
        # generator, so that the readable rows are asked exactly as without task.sft_open_unstated
        unstated_rng = random.Random(f"open_unstated:{self.data_seed}")
        rows, asked = [], 0
        for row in train.to_list():
            unstated = self._unstated(row)
            # a coin-flip row stays its yes/no question (the answer out of the loss)
            coin_flip = self._answer_is_a_coin_flip(row)
            if row.get("fact") and not coin_flip and (unstated or rng.random() < self.config.sft_open_fraction):
                confidence = parse_epistemic_status(row["completion"]).confidence
                row = self.asked_openly(row, unstated_rng if unstated else rng)
                row["completion"] = format_epistemic_status(confidence, row["answer"])
                asked += 1
            rows.append(row)
        log.info("warm-up: %d of %d rows asked as open questions (task.sft_open_fraction, task.sft_open_unstated)",
                 asked, len(rows))
        return datasets.Dataset.from_list(rows)

    def asked_openly(self, row: dict, rng: random.Random) -> dict:
        """``row`` (one with a known ``fact``) asked as an open question about its fact, in a wording drawn from
        ``rng``: the same activations and layer, the answer the fact itself, or "not stated" where the prompt does
        not state it and ``task.sft_open_unstated`` asks for that."""
        question = open_question(row["kind"], rng, self.config.data.generate.phrasings)
        suffix = CONFIDENCE_INSTRUCTION if self.config.prompt.confidence_instruction else ""
        num_vectors = len(self._steering.store[row["activation_id"]][int(row["source_layer"])])
        return {**row, "question": question, "answer": NOT_STATED if self._unstated(row) else row["fact"],
                "prompt": oracle_messages(int(row["source_layer"]), num_vectors, question + suffix)}

    def _answer_is_a_coin_flip(self, row: dict) -> bool:
        """A warm-up row kept as its yes/no question with the answer out of the loss: one that injects random
        vectors (``task.sft_none_fraction``), or one about an unstated fact with ``task.sft_unstated_tag_only``."""
        return (row["activation_id"].startswith(NONE_ID_PREFIX)
                or self.config.sft_unstated_tag_only and row.get("readable") is False)

    def _unstated(self, row: dict) -> bool:
        """A row whose fact the prompt does not state, to be answered "not stated" (``task.sft_open_unstated``)."""
        return self.config.sft_open_unstated and row.get("readable") is False

    def _format_targets(self, stage, rows: list[dict], raw: list[str], run_dir: RunDir) -> list[dict]:
        answers = [parse_epistemic_status(text).answer.strip() for text in raw]  # any tag it wrote is replaced
        kept = [(r, a) for r, a in zip(rows, answers) if a]
        source = str(getattr(stage.confidence, "value", stage.confidence))
        if source == "auto":
            source = "kind_mean" if self.context.judge is not None else "spread"
        if source in ("judge", "kind_mean"):
            infos = self.judge_answers([r for r, _ in kept], [a for _, a in kept])
            if source == "kind_mean":
                infos = _kind_means([r["kind"] for r, _ in kept], infos)
            confidences = [None if i is None else round(100 * i) for i in infos]
            if source == "kind_mean":
                rng = random.Random(stage.seed)
                offsets = range(-stage.confidence_jitter, stage.confidence_jitter + 1, 10)
                confidences = [None if c is None else min(100, max(0, 10 * round(c / 10) + rng.choice(offsets)))
                               for c in confidences]
        else:
            rng = random.Random(stage.seed)
            confidences = [rng.choice(list(self.config.sft_confidences)) for _ in kept]
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

    def oracle_rows(self, rows: list[dict], tokenizer, model, seed: int = 0) -> list[dict]:
        """Oracle rows (with activations extracted into the steering store) for more labelled rows: a
        classification suite, or a calibration split for a recalibration baseline."""
        self._steering.store.update(self._extract({r["prompt"] for r in rows}, tokenizer, model, self._layers))
        rng = random.Random(seed)
        return pair_controls([self._oracle_row(r, self._steering.store, self._draw(rng)) for r in rows])

    def extra_evaluations(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        from .confidence_baselines import per_dataset

        out = self._answer_probability_baseline(model, tokenizer, generate, run_dir, tag)
        if scores_held_out_rows(tag) and self.config.baselines_suite:
            suite = self._baseline_suite(model, tokenizer, run_dir, tag)
            out = {**out, "baselines": {**out.get("baselines", {}), **suite}}
        figures = distributed.on_main(lambda: per_dataset(run_dir, tag, ("control", "none")))
        if figures is not None:
            out["per_dataset"] = figures
        ccfg = self.config.classification
        if not ccfg.enabled:
            return out
        return {**out, **self._classification(model, tokenizer, generate, run_dir, tag)}

    def _baseline_suite(self, model, tokenizer, run_dir: RunDir, tag: str) -> dict:
        """``task.baselines_suite``: the mode share, the warm-up's number, the text-only rule and the probe
        (``confidence_baselines``) written into every own-condition row of the evaluation, with their pooled
        figures for eval.json."""
        from ao_calib.evaluation.evaluate import rows_of_records

        from . import confidence_baselines as cb

        if distributed.is_distributed() and distributed.sharded():
            log.warning("task.baselines_suite: skipped under a sharded model (it scores on the main process)")
            return {}

        def run() -> dict:
            path = run_dir.predictions(tag)
            records = [json.loads(line) for line in path.read_text().splitlines()]
            rows = rows_of_records(self._test_rows, records, self.context.eval_seed, cb.JOIN)
            if rows is None:
                log.warning("task.baselines_suite: skipped: the rows of %s are not those this evaluation drew", path)
                return {}
            distributions = cb.outcome_distributions(
                model, tokenizer, rows, [r["completion"] for r in records], self._steering,
                chat_template_kwargs=dict(self.context.model.chat_template_kwargs))
            cb.add_to_records(records, "mode", *cb.mode_baseline(distributions, [r["answer"] for r in rows],
                                                                  self.config.baselines_mode_k))
            cb.add_to_records(records, "warmup", *cb.warmup_baseline(run_dir, records))
            cb.add_to_records(records, "text_rule", cb.text_rule(records))
            cb.add_to_records(records, "probe", *cb.probe_baseline_rows(
                self._steering.store, self._train_rows, rows, self._layers, activation_id,
                self.config.baselines_probe_c, self.data_seed))
            write_jsonl(path, records)
            report = cb.pooled_report(records, ["mode", "warmup", "text_rule", "probe"])
            print(f"[eval:{tag}] baselines (task.baselines_suite): " + ", ".join(
                f"{name} AUROC {m['auroc']:.3f} ECE {m['ece']:.3f}" for name, m in report.items()), flush=True)
            return report

        return distributed.on_main(run)

    def _answer_probability_baseline(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        """``task.baselines_logprob_platt`` beside a held-out evaluation (``scores_held_out_rows``): Platt-scaled on
        a run scoring the test split (with a validation split to fit on), raw on a run scoring the validation split;
        nothing otherwise."""
        split = "test" if self.config.data.test_path else self.config.data.eval_split  # a file: not validation
        if (not scores_held_out_rows(tag) or not self.config.baselines_logprob_platt
                or not (split == "validation" or (split == "test" and self._validation_rows))):
            return {}
        name = "logprob" if split == "validation" else "logprob_platt"
        if distributed.is_distributed() and distributed.sharded():
            log.warning("baselines.%s: skipped under a sharded model (it scores on the main process)", name)
            return {}
        if split == "validation":
            return self._logprob_on_validation(model, tokenizer, run_dir, tag)
        return self._logprob_platt_baseline(model, tokenizer, generate, run_dir, tag)

    def _logprob_platt_baseline(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        """The classical confidence the stated one must beat, on the same rows: the oracle's probability of its
        own answer (``baselines.own_answer_probabilities``), Platt-scaled on the validation split (the oracle's own
        answers there, scored against their labels). Written into every row of the evaluation's own-condition
        predictions file as ``baselines.logprob_platt``, with its AUROC and ECE in the report. Runs at the final
        evaluation of a run whose generated data has a validation split (and that does not evaluate on it)."""
        from ao_calib.calibration.metrics import auroc, expected_calibration_error, within_group_auroc
        from ao_calib.calibration.recalibration import PlattScaling

        from .baselines import own_answer_probabilities

        # a statement the evaluation scores (a held-out file may hold validation rows) is never fitted on
        scored = {r["activation_id"] for r in self._test_rows}
        fit_rows = [r for r in self._validation_rows if activation_id(r["prompt"]) not in scored]
        if len(fit_rows) < len(self._validation_rows):
            log.warning("baselines.logprob_platt: %d of the %d validation rows are among the rows scored; fitted on "
                        "the other %d", len(self._validation_rows) - len(fit_rows), len(self._validation_rows),
                        len(fit_rows))
        if not fit_rows:
            return {}
        # every process extracts (the disk cache makes it once) and generates its share; the main one scores
        self._steering.store.update(self._extract({r["prompt"] for r in fit_rows}, tokenizer, model, self._layers))
        rng = random.Random(self.data_seed + 1)
        validation = pair_controls([self._oracle_row(r, self._steering.store, self._draw(rng)) for r in fit_rows])
        completions = generate(validation, desc=f"{tag}/validation (Platt fit)")

        def fit_and_apply() -> dict:
            template = dict(self.context.model.chat_template_kwargs)
            correct = [s["correct"] for s in self.score(completions, validation)]
            if len(set(correct)) < 2:
                log.warning("baselines.logprob_platt: the validation answers are all right or all wrong; skipped "
                            "(baselines.logprob written raw)")
                return self._logprob_on_validation(model, tokenizer, run_dir, tag, on_main=False)
            fit = PlattScaling.fit(own_answer_probabilities(model, tokenizer, validation, completions,
                                                            self._steering, chat_template_kwargs=template), correct)
            scored = self._own_answer_probabilities_of_predictions(model, tokenizer, run_dir, tag, "logprob_platt")
            if scored is None:
                return {}
            path, records, probabilities = scored
            platt = fit(probabilities).tolist()
            for record, p_own, p_platt in zip(records, probabilities, platt):
                record["baselines"] = {"logprob": p_own, "logprob_platt": p_platt}
            write_jsonl(path, records)
            hits = [r["scores"]["correct"] for r in records]
            report = {"auroc": auroc(platt, hits), "ece": expected_calibration_error(platt, hits),
                      "auroc_within_question": within_group_auroc(platt, hits, [r["question"] for r in records]),
                      "platt": {"a": fit.a, "b": fit.b}, "validation_rows": len(validation),
                      "validation_rows_scored_too": len(self._validation_rows) - len(fit_rows),
                      "validation_accuracy": sum(correct) / len(correct)}
            print(f"[eval:{tag}] baseline: own-answer probability, Platt-scaled on {len(validation)} validation "
                  f"rows: AUROC {report['auroc']:.3f}, within-question AUROC {report['auroc_within_question']:.3f}, "
                  f"ECE {report['ece']:.3f}", flush=True)
            return {"baselines": {"logprob_platt": report}}

        return distributed.on_main(fit_and_apply)

    def _own_answer_probabilities_of_predictions(self, model, tokenizer, run_dir: RunDir, tag: str, name: str):
        """(path, records, probabilities): the evaluation's own-condition predictions rows and the oracle's own
        probability of each row's answer, read off the model on the rows the evaluation drew (a sample of
        eval.num_samples, in file order, not the first ones); None, with a warning naming ``baselines.<name>``,
        when the file's rows are not those."""
        from ao_calib.evaluation.evaluate import rows_of_records

        from .baselines import own_answer_probabilities

        path = run_dir.predictions(tag)
        records = [json.loads(line) for line in path.read_text().splitlines()]
        rows = rows_of_records(self._test_rows, records, self.context.eval_seed, ("source_id", "question"))
        if rows is None:
            log.warning("baselines.%s: skipped: the predictions rows of %s are not the rows this evaluation drew",
                        name, path)
            return None
        probabilities = own_answer_probabilities(model, tokenizer, rows, [r["completion"] for r in records],
                                                 self._steering,
                                                 chat_template_kwargs=dict(self.context.model.chat_template_kwargs))
        return path, records, probabilities

    def _logprob_on_validation(self, model, tokenizer, run_dir: RunDir, tag: str, on_main: bool = True) -> dict:
        """A run that evaluates on the validation split (choosing settings) has nothing to fit Platt's map on but
        the rows it scores, so it writes the oracle's own answer probability raw, as ``baselines.logprob`` in every
        own-condition row, with its AUROC in eval.json: Platt's map is increasing, so the raw probability ranks the
        rows as the Platt-scaled one would, and the bar "AUROC above the Platt baseline's" can be checked on
        validation from the rows."""
        from ao_calib.calibration.metrics import auroc, within_group_auroc

        def score() -> dict:
            scored = self._own_answer_probabilities_of_predictions(model, tokenizer, run_dir, tag, "logprob")
            if scored is None:
                return {}
            path, records, probabilities = scored
            for record, p_own in zip(records, probabilities):
                record["baselines"] = {"logprob": p_own}
            write_jsonl(path, records)
            hits = [r["scores"]["correct"] for r in records]
            report = {"auroc": auroc(probabilities, hits),
                      "auroc_within_question": within_group_auroc(probabilities, hits,
                                                                  [r["question"] for r in records])}
            print(f"[eval:{tag}] baseline: own-answer probability (raw; Platt is fitted on test-split runs only): "
                  f"AUROC {report['auroc']:.3f}, within-question AUROC {report['auroc_within_question']:.3f}",
                  flush=True)
            return {"baselines": {"logprob": report}}

        return distributed.on_main(score) if on_main else score()

    def _classification(self, model, tokenizer, generate, run_dir: RunDir, tag: str) -> dict:
        ccfg = self.config.classification
        suite, skipped = load_suite(list(ccfg.datasets), ccfg.data_dir, ccfg.n_per_dataset, ccfg.seed)
        for name, reason in skipped.items():
            log.warning("classification eval: %s skipped: %s", name, reason)
        results, pooled, records = {}, [], []
        for name, rows in suite.items():
            oracle_rows = self.oracle_rows(rows, tokenizer, model, seed=ccfg.seed)
            completions = generate(oracle_rows, desc=f"{tag}/{name}")
            scores = self.score(completions, oracle_rows)
            controls = [None] * len(oracle_rows)
            if self.config.eval_control and all(r["control_activation_id"] for r in oracle_rows):
                controls = generate(oracle_rows, condition="other", desc=f"{tag}/{name}_control")
            pooled += scores
            results[name] = _calibration_of(scores)
            if controls[0] is not None:
                results[name]["control_accuracy"] = sum(
                    s["correct"] for s in self.score(controls, oracle_rows)) / len(oracle_rows)
            records += [{"dataset": name, "question": r["question"], "expected": r["answer"],
                         "source_layer": r["source_layer"], "activation_id": r["activation_id"],
                         "control_activation_id": r["control_activation_id"], "completion": c, "scores": sc,
                         "control_completion": cc} for r, c, sc, cc in zip(oracle_rows, completions, scores, controls)]
        if pooled:
            results["overall"] = _calibration_of(pooled)
        if distributed.is_main():
            predictions = run_dir.predictions(tag, "classification")
            write_jsonl(predictions, records)
            _print_classification_table(tag, results, skipped)
        return {"classification": results, "classification_skipped": skipped}

    def metric_names(self) -> frozenset[str]:
        # the stated number's calibration figures on every run (aggregate computes them whatever the reward), and
        # aggregate's own figures (judge_failed and informativeness only on judged rows)
        return super().metric_names() | {*calibration_figure_names(), "confidence", "parse_rate",
                                          "calibration_reward", "informativeness", "judge_failed"}

    def aggregate(self, records: list[dict], run_dir: RunDir, tag: str) -> dict[str, float]:
        """Rows checked against a yes/no reference: calibration against correctness. Judged rows (WildChat, open
        references): calibration against the judge's informativeness (AUROC at informativeness >= 0.5, Brier
        against the score itself). Both kinds together: each row's own outcome (``checked_against_reference``)."""
        parse_rate = sum(r["scores"]["parsed"] for r in records) / max(len(records), 1)
        judged = [r for r in records if "informativeness" in r["scores"]]
        failed = sum(r["scores"].get("judge_failed", 0.0) for r in records)
        scored = [r for r in records if "correct" in r["scores"]]  # a masked judgment has neither
        if not scored:
            return {"parse_rate": parse_rate, "judge_failed": failed, "accuracy": float("nan")}
        outcomes = [r["scores"].get("informativeness", r["scores"]["correct"]) for r in scored]
        metrics = calibration_figures(scored, [scored_confidence(r["scores"]["confidence"]) for r in scored],
                                      outcomes, run_dir, tag)
        metrics["parse_rate"] = parse_rate
        metrics["calibration_reward"] = sum(r["scores"]["calibration_reward"] for r in scored) / len(scored)
        if judged:
            metrics["informativeness"] = sum(outcomes) / len(outcomes)
            metrics["judge_failed"] = failed
        return metrics


def _kind_means(kinds: list[str], scores: list[float | None]) -> list[float | None]:
    """Each judged score replaced by the mean score of its kind (masked scores stay None)."""
    by_kind: dict[str, list[float]] = {}
    for kind, score in zip(kinds, scores):
        if score is not None:
            by_kind.setdefault(kind, []).append(score)
    return [None if s is None else statistics.fmean(by_kind[k]) for k, s in zip(kinds, scores)]


def _calibration_of(scores: list[dict]) -> dict[str, float]:
    metrics = calibration_report([scored_confidence(s["confidence"]) for s in scores], [s["correct"] for s in scores])
    return {**metrics, "parse_rate": sum(s["parsed"] for s in scores) / len(scores), "n": len(scores)}


def _print_classification_table(tag: str, results: dict, skipped: dict) -> None:
    lines = [f"[eval:{tag}] classification suite",
             f"  {'dataset':<18}{'n':>6}{'acc':>8}{'control':>9}{'AUROC':>8}{'ECE':>8}{'MCE':>8}{'Brier':>8}"]
    for name, m in results.items():
        control = f"{m['control_accuracy']:>9.3f}" if "control_accuracy" in m else f"{'-':>9}"
        lines.append(f"  {name:<18}{m['n']:>6}{m['accuracy']:>8.3f}{control}{m['auroc']:>8.3f}{m['ece']:>8.3f}"
                     f"{m['mce']:>8.3f}{m['brier']:>8.3f}")
    lines += [f"  {name:<18} skipped: {reason}" for name, reason in skipped.items()]
    print("\n".join(lines), flush=True)


TRAINING_TAGS = re.compile(r"initial|warmup|(\w+_)?step\d+")  # the evaluations before, during and between stages


def scores_held_out_rows(tag: str) -> bool:
    """Whether an evaluation is one the baselines are computed beside: the run's final one, or one a saved run is
    given (``python -m ao_calib.eval run_dir=RUN tag=NAME``), not those during training."""
    return tag == RunDir.FINAL or not TRAINING_TAGS.fullmatch(tag)


def activation_id(prompt: str) -> str:
    return hashlib.sha1(prompt.encode()).hexdigest()[:16]
