"""SFT through TRL's SFTTrainer on prompt -> completion rows, loss on completion tokens only; with a task's
activation steering, the injection is part of every training forward pass."""

from __future__ import annotations

import logging
import random

import datasets
from omegaconf import DictConfig
from trl import SFTConfig, SFTTrainer

from ao_calib.calibration.contract import confidence_span, tag_span
from ao_calib.trainers.config import SFTTrainerConfig
from ao_calib.errors import AOCalibError
from ao_calib.settings import default_of, plain
from ao_calib.steering import SteeringBatch
from ao_calib.trainers.common import AtomicCheckpointMixin, TrainerSetup, stage_batches, training_kwargs
from ao_calib.trainers.steering import SteeringCollator

log = logging.getLogger(__name__)


def end_of_turn(tokenizer, chat_template_kwargs: dict) -> str:
    """The text a chat template puts after an assistant message (Qwen: "<|im_end|>\\n")."""
    marker = "\x00COMPLETION\x00"
    text = tokenizer.apply_chat_template([{"role": "user", "content": "u"}, {"role": "assistant", "content": marker}],
                                         tokenize=False, **chat_template_kwargs)
    return text[text.index(marker) + len(marker):]


def tokenize_pairs(dataset: datasets.Dataset, tokenizer, chat_template_kwargs: dict, max_length: int,
                   confidence_in_loss: bool = True, tag_loss_fraction: float = 1.0, seed: int = 0
                   ) -> datasets.Dataset:
    """``input_ids`` = the prompt exactly as generation sees it (chat template + generation prompt), then the
    completion and the end-of-turn text; ``completion_mask`` marks the part the loss is computed on: without the
    tokens of a leading tag's number NN when ``confidence_in_loss`` is false, and without the whole tag in all but
    a ``tag_loss_fraction`` of the rows (chosen per row from ``seed``: the same rows on every run of that seed)."""
    suffix = end_of_turn(tokenizer, chat_template_kwargs)

    def encode(row, index):
        prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True,
                                               **chat_template_kwargs)
        prompt_ids = tokenizer.encode(prompt, add_special_tokens=False)
        with_tag = tag_loss_fraction >= 1 or random.Random(f"{seed}:{index}").random() < tag_loss_fraction
        completion = tokenizer(row["completion"] + suffix, add_special_tokens=False,
                               return_offsets_mapping=not (confidence_in_loss and with_tag))
        completion_ids = completion["input_ids"]
        mask = [1] * len(completion_ids)
        span = None
        if not with_tag:
            span = tag_span(row["completion"])
        elif not confidence_in_loss:
            span = confidence_span(row["completion"])
        if span is not None:  # tokens that overlap the span leave the loss
            mask = [0 if start < span[1] and end > span[0] else 1 for start, end in completion["offset_mapping"]]
        ids = (prompt_ids + completion_ids)[:max_length]
        return {"input_ids": ids, "completion_mask": ([0] * len(prompt_ids) + mask)[:max_length]}

    if "completion" not in dataset.column_names:
        raise AOCalibError("trainer=sft needs rows with a 'completion' (the target text); this task has none")
    encoded = dataset.map(encode, with_indices=True, desc="tokenizing SFT pairs")
    # A prompt that fills max_length leaves nothing to learn from; TRL would silently drop such rows.
    lost = sum(1 for mask in encoded["completion_mask"] if not any(mask))
    if lost == len(encoded):
        raise AOCalibError(f"every SFT example's prompt is at least max_length={max_length} tokens: raise "
                           "trainer.max_length (or warmup.max_length)")
    if lost:
        log.warning("%d of %d SFT examples have no completion tokens within max_length=%d and are skipped",
                    lost, len(encoded), max_length)
    return encoded


class AOSFTTrainer(AtomicCheckpointMixin, SFTTrainer):
    def __init__(self, *args, steering=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.steering = steering
        if steering is not None:
            self.data_collator = SteeringCollator(self.data_collator, steering)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        vectors, positions = inputs.pop("steer_vectors", None), inputs.pop("steer_positions", None)
        if vectors is None:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        with self.steering.context(model, SteeringBatch(vectors, positions), "sft"):
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)


def build_sft_config(setup: TrainerSetup, stage: DictConfig, stage_name: str = "train") -> SFTConfig:
    micro, accumulation = stage_batches(setup.model_config, stage)
    return SFTConfig(
        **training_kwargs(setup, stage, stage_name),
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        max_length=stage.max_length,
        completion_only_loss=True,
        remove_unused_columns=False,  # the steering collator reads each row's activation id
    )


def build_sft_trainer(setup: TrainerSetup, stage: DictConfig, stage_name: str, callbacks: list) -> AOSFTTrainer:
    chat_kwargs = plain(setup.model_config.chat_template_kwargs)
    return AOSFTTrainer(
        model=setup.model,
        args=build_sft_config(setup, stage, stage_name),
        train_dataset=tokenize_pairs(setup.data.train, setup.tokenizer, chat_kwargs, stage.max_length,
                                     # the schema's defaults for a stage saved before these keys existed
                                     confidence_in_loss=stage.get("confidence_in_loss",
                                                                  default_of(SFTTrainerConfig, "confidence_in_loss")),
                                     tag_loss_fraction=stage.get("tag_loss_fraction",
                                                                 default_of(SFTTrainerConfig, "tag_loss_fraction")),
                                     seed=setup.seed),
        processing_class=setup.tokenizer,
        callbacks=callbacks,
        steering=setup.steering,
    )
