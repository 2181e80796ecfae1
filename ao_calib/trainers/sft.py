"""SFT through TRL's SFTTrainer on prompt -> completion rows, loss on completion tokens only; with a task's
activation steering, the injection is part of every training forward pass."""

from __future__ import annotations

import contextlib
import json
import logging
import random
from collections.abc import Collection
from typing import NamedTuple

import datasets
import torch
from trl import SFTConfig, SFTTrainer

from ao_calib.calibration.contract import (confidence_span, first_digit_values, number_tokens,
                                          parse_epistemic_status, tag_span)
from ao_calib.core.chat import chat_prompt_text
from ao_calib.core.errors import AOCalibError
from ao_calib.steering import SteeringBatch
from ao_calib.tools import TRAJECTORY
from ao_calib.trainers import calibration_loss
from ao_calib.trainers.common import (AtomicCheckpointMixin, BackboneStates, TrainerSetup, peft_base, stage_batches,
                                      training_kwargs)
from ao_calib.trainers.config import CalibrationLossForm, ConfidenceLoss, SFTTrainerConfig
from ao_calib.trainers.steering import SteeringCollator

log = logging.getLogger(__name__)




def end_of_turn(tokenizer, chat_template_kwargs: dict) -> str:
    """The text a chat template puts after an assistant message (Qwen: "<|im_end|>\\n")."""
    marker = "\x00COMPLETION\x00"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "u"}, {"role": "assistant", "content": marker}],
                                         tokenize=False, **chat_template_kwargs)
    return text[text.index(marker) + len(marker):]


def tokenize_pairs(dataset: datasets.Dataset, tokenizer, chat_template_kwargs: dict, max_length: int,
                   confidence_in_loss: bool = True, tag_loss_fraction: float = 1.0, seed: int = 0,
                   confidence_loss: str = "cross_entropy", expected_over_draw: bool = False,
                   number_ids: Collection[int] | None = None) -> datasets.Dataset:
    """``input_ids`` = the prompt exactly as generation sees it (chat template + generation prompt), then the
    completion and the end-of-turn text; ``completion_mask`` marks the part the loss is computed on: without the
    tokens of a leading tag's number NN when ``confidence_in_loss`` is false, without the whole tag in all but
    a ``tag_loss_fraction`` of the rows (chosen per row from ``seed``: the same rows on every run of that seed), and
    without the answer after the tag in rows marked ``answer_in_loss: false``. With ``confidence_loss=calibration``
    the number's digits are in the mask of every row (the drawn numbers are the prior that
    ``ao_calib.trainers.calibration_loss`` moves), and each row records where its number's first token and its
    answer are (``COLUMNS``; that token must be one of ``number_ids`` where given); with ``expected_over_draw``, a
    row that names the answers its label was drawn from (``answer_drawn_from``) also records each one's token where
    the answer starts (``CHOICES``). A row with ``TRAJECTORY`` (a whole episode) is the prompt and that episode, its
    assistant turns in the loss."""
    suffix = end_of_turn(tokenizer, chat_template_kwargs)
    calibration = confidence_loss == "calibration"  # ConfidenceLoss is a str enum: its members equal their values

    def encode(row, index):
        if row.get(TRAJECTORY):
            return encode_trajectory(row)
        prompt = chat_prompt_text(tokenizer, row["prompt"], chat_template_kwargs)
        prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
        with_tag = tag_loss_fraction >= 1 or random.Random(f"{seed}:{index}").random() < tag_loss_fraction
        text = row["completion"]
        completion = tokenizer(text + suffix, add_special_tokens=False, return_offsets_mapping=True)
        completion_ids, offsets = completion["input_ids"], completion["offset_mapping"]

        def overlapping(span):
            return [span is not None and start < span[1] and end > span[0] for start, end in offsets]

        number, tag = confidence_span(text), tag_span(text)
        out = overlapping(tag if not with_tag else number if not confidence_in_loss else None)
        answer = (tag[1] if tag else 0, len(text))
        in_answer = [start >= answer[0] and end <= answer[1] and end > start for start, end in offsets]
        if row.get("answer_in_loss") is False:
            out = [o or a for o, a in zip(out, in_answer)]
        first_token = None
        if calibration and number is not None:
            first_token = next(i for i, (start, end) in enumerate(offsets) if start <= number[0] < end)
            if number_ids is not None and completion_ids[first_token] not in number_ids:
                raise AOCalibError(
                    f"warmup.confidence_loss=calibration reads the number off its first token, and row {index} "
                    f"writes it as {text[slice(*offsets[first_token])]!r}, which is not how the tag alone begins "
                    "it: set warmup.confidence_loss=cross_entropy")
            digits = overlapping(number)
            out = [o and not d for o, d in zip(out, digits)]
        mask = [0 if o else 1 for o in out]
        ids = (prompt_ids + completion_ids)[:max_length]
        encoded = {"input_ids": ids, "completion_mask": ([0] * len(prompt_ids) + mask)[:max_length]}
        if calibration:
            # token indices in input_ids; -1 where the row has none, or where max_length cut it off
            at, kept = len(prompt_ids), len(ids)
            answer_tokens = [at + i for i, a in enumerate(in_answer) if a]
            whole_answer = bool(answer_tokens) and answer_tokens[-1] < kept
            number_at = at + first_token if first_token is not None and at + first_token < kept else -1
            encoded.update(zip(calibration_loss.COLUMNS, (number_at, answer_tokens[0] if whole_answer else -1,
                                                          answer_tokens[-1] + 1 if whole_answer else -1)))
            if expected_over_draw:
                choices = row.get("answer_drawn_from") or []
                encoded[calibration_loss.CHOICES] = [choice_token(text, answer[0], choice, index) for choice in choices]
        return encoded

    def encode_trajectory(row):
        """A whole episode (the model's calls, the tools' results, its answer): the model's turns in the loss (the
        template's generation marks), the tools' results not."""
        episode = json.loads(row[TRAJECTORY])
        out = tokenizer.apply_chat_template(row["prompt"] + episode, tokenize=True, return_dict=True,
                                            return_assistant_tokens_mask=True, **chat_template_kwargs)
        ids, mask = out["input_ids"][:max_length], out["assistant_masks"][:max_length]
        if not any(out["assistant_masks"]):
            raise AOCalibError(f"{TRAJECTORY} rows train on the model's turns, which the chat template marks with "
                               "{% generation %}: this tokenizer's template has no such marks (ao_calib.tools."
                               "chat_format installs one that does)")
        return {"input_ids": ids, "completion_mask": list(mask)}

    def choice_token(text: str, answer_at: int, choice: str, index: int) -> int:
        """The one token ``choice`` is where the row's answer starts, written in the answer's place."""
        answer = text[answer_at:]
        lead = answer[:len(answer) - len(answer.lstrip())]
        written = text[:answer_at] + lead + choice
        pieces = tokenizer(written, add_special_tokens=False, return_offsets_mapping=True)
        tokens = [token for token, (start, end) in zip(pieces["input_ids"], pieces["offset_mapping"])
                  if start >= answer_at and end > start]
        if len(tokens) != 1:
            raise AOCalibError(f"warmup.calibration_expected_over_draw needs each answer a row's label was drawn from "
                               f"to be one token; row {index} names {choice!r}, which this tokenizer writes as "
                               f"{len(tokens)} tokens after {text[:answer_at]!r}: set "
                               "warmup.calibration_expected_over_draw=false")
        return tokens[0]

    if "completion" not in dataset.column_names and TRAJECTORY not in dataset.column_names:
        raise AOCalibError(f"trainer=sft needs rows with a 'completion' (the target text) or '{TRAJECTORY}' (a whole "
                           "episode); this task has neither")
    # with expected_over_draw, one Arrow batch: a choices column empty in a whole first batch (the rows that carry
    # choices all at the end) would be typed null and refuse the later rows' token ids
    encoded = dataset.map(encode, with_indices=True, desc="tokenizing SFT pairs",
                          writer_batch_size=max(1000, len(dataset)) if expected_over_draw else 1000)
    # A prompt that fills max_length leaves nothing to learn from; TRL would silently drop such rows.
    lost = sum(1 for mask in encoded["completion_mask"] if not any(mask))
    if lost == len(encoded):
        raise AOCalibError(f"every SFT example's prompt is at least max_length={max_length} tokens: raise "
                           "trainer.max_length (or warmup.max_length)")
    if lost:
        log.warning("%d of %d SFT examples have no completion tokens within max_length=%d and are skipped",
                    lost, len(encoded), max_length)
    return encoded


class IndexColumns:
    """Pads like the wrapped collator, then adds each row's ``calibration_loss.COLUMNS`` as tensors (token indices
    into the right-padded ids, which padding does not move)."""

    def __init__(self, base):
        self.base = base

    def __call__(self, examples):
        batch = self.base(examples)
        for key in calibration_loss.COLUMNS:
            batch[key] = torch.tensor([int(example[key]) for example in examples])
        if calibration_loss.CHOICES in examples[0]:
            # rows name 0..k answer tokens: [rows, k], -1 where a row names fewer
            width = max(1, *(len(example[calibration_loss.CHOICES]) for example in examples))
            batch[calibration_loss.CHOICES] = torch.tensor(
                [list(example[calibration_loss.CHOICES]) + [-1] * (width - len(example[calibration_loss.CHOICES]))
                 for example in examples])
        return batch


class CalibrationLoss(NamedTuple):
    """What ``confidence_loss=calibration`` needs beside the batch."""

    number_ids: list[int]  # the tokens a number can begin with (contract.number_tokens)
    values: dict[int, int]  # index into number_ids -> the target number it begins
    weight: float
    start_step: int = 0  # optimiser steps before the term joins the loss
    form: str = "expected_penalty"  # calibration_loss.calibration_term's form (warmup.calibration_loss_form)
    greedy: bool = False  # c: whether greedy decoding is right, not the answer's probability (calibration_greedy)


class AOSFTTrainer(AtomicCheckpointMixin, SFTTrainer):
    def __init__(self, *args, steering=None, calibration: CalibrationLoss | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.steering, self.calibration = steering, calibration
        if steering is not None:
            self.data_collator = SteeringCollator(self.data_collator, steering)
        if calibration is not None:
            self.data_collator = IndexColumns(self.data_collator)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        indices = {key: inputs.pop(key) for key in (*calibration_loss.COLUMNS, calibration_loss.CHOICES)
                   if key in inputs}
        if indices and self.state.global_step < self.calibration.start_step:
            indices = {}  # warmup.calibration_loss_start: the number learns from its cross-entropy alone so far
        vectors, positions = inputs.pop("steer_vectors", None), inputs.pop("steer_positions", None)
        hidden = None
        with contextlib.ExitStack() as stack:
            if vectors is not None:
                stack.enter_context(self.steering.context(model, SteeringBatch(vectors, positions), "sft"))
            if indices:
                base = peft_base(self.accelerator.unwrap_model(self.model))
                hidden = stack.enter_context(BackboneStates(base.base_model))
            result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        if hidden is None:
            return result
        term = calibration_loss.calibration_term(torch.cat(hidden.outputs), base.get_output_embeddings(),
                                                 inputs["input_ids"], indices, self.calibration.number_ids,
                                                 self.calibration.values, self.calibration.form,
                                                 self.calibration.greedy)
        if term is None:
            return result
        value, logs = term
        for key, logged in logs.items():
            self._metrics["train" if model.training else "eval"][key].append(logged)
        # TRL's cross-entropy is already a share of the whole accumulated step (num_items_in_batch counts its
        # tokens); the term is a mean over this micro-batch's rows, so it is split across the step the same way
        steps = self.current_gradient_accumulation_steps if num_items_in_batch is not None else 1
        extra = self.calibration.weight * value / steps
        return (result[0] + extra, *result[1:]) if return_outputs else result + extra


def build_sft_config(setup: TrainerSetup, stage: SFTTrainerConfig, stage_name: str = "train") -> SFTConfig:
    micro, accumulation = stage_batches(setup.model_config, stage)
    return SFTConfig(
        **training_kwargs(setup, stage, stage_name),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        max_length=stage.max_length,
        completion_only_loss=True,
        remove_unused_columns=False,  # the steering collator reads each row's activation id
    )


def build_sft_trainer(setup: TrainerSetup, stage: SFTTrainerConfig, stage_name: str, callbacks: list) -> AOSFTTrainer:
    chat_kwargs = dict(setup.model_config.chat_template_kwargs)
    numbers = None
    if stage.confidence_loss == ConfidenceLoss.calibration:
        numbers = number_tokens(setup.tokenizer, target_number_values(setup.data.train).values())
    train = tokenize_pairs(setup.data.train, setup.tokenizer, chat_kwargs, stage.max_length,
                           confidence_in_loss=stage.confidence_in_loss, tag_loss_fraction=stage.tag_loss_fraction,
                           seed=setup.seed, confidence_loss=stage.confidence_loss,
                           expected_over_draw=stage.calibration_expected_over_draw,
                           number_ids=numbers.ids if numbers else None)
    calibration = None
    if numbers is not None:
        calibration = CalibrationLoss(numbers.ids, numbers.values, float(stage.calibration_loss_weight),
                                      start_step=round(float(stage.calibration_loss_start) * stage.max_steps),
                                      form=CalibrationLossForm(stage.calibration_loss_form).value,
                                      greedy=bool(stage.calibration_greedy))
        log.info("%s: the tag's number learned by the calibration term (warmup.confidence_loss, form %s%s) from step "
                 "%d, read off its first token as %s", stage_name, calibration.form,
                 ", c from greedy decoding" if calibration.greedy else "", calibration.start_step,
                 {setup.tokenizer.decode([numbers.ids[i]]): n for i, n in sorted(numbers.values.items())})
        if calibration_loss.CHOICES in train.column_names:
            drawn = sum(1 for choices in train[calibration_loss.CHOICES] if choices)
            (log.info if drawn else log.warning)(
                "%s: %d of %d rows name the answers their label was drawn from; their c is its expectation over the "
                "draw (warmup.calibration_expected_over_draw)%s", stage_name, drawn, len(train),
                "" if drawn else ": none here, so the key changes nothing")
    return AOSFTTrainer(
        model=setup.model,
        args=build_sft_config(setup, stage, stage_name),
        train_dataset=train,
        processing_class=setup.tokenizer,
        callbacks=callbacks,
        steering=setup.steering,
        calibration=calibration,
    )


def target_number_values(rows: datasets.Dataset) -> dict[int, int]:
    """The first digit -> number map of the numbers the rows' targets state (``first_digit_values``)."""
    numbers = {status.confidence for status in map(parse_epistemic_status, rows["completion"]) if status.parsed}
    if not numbers:
        raise AOCalibError("warmup.confidence_loss=calibration: no SFT target states an [epistemic status: NN] tag; "
                           "set warmup.confidence_loss=cross_entropy")
    try:
        return first_digit_values(numbers)
    except ValueError as error:
        raise AOCalibError(f"warmup.confidence_loss=calibration: the targets' numbers {sorted(numbers)}: {error}; "
                           "choose the task's numbers so (task.warmup_rows.confidences for the oracle)") from error
