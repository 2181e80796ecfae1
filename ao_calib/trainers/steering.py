"""Activation steering inside TRL's trainers, for tasks that inject activations (``TaskData.steering``).

``SteeringMixin`` goes in front of any GRPOTrainer subclass (GRPO, PPO): every forward pass that sees a prompt
injects that row's own activations. The passes are: the generation prefill, the old-policy and reference
log-probs of the generation batch, and the training pass on each shuffled micro-batch. The vectors and their
positions travel inside TRL's batch dict (``steer_vectors``, ``steer_positions``), so TRL's shuffling and
splitting move them with their rows; every pass checks that each injected position holds the placeholder token.

``SteeringCollator`` does the same for SFT: it attaches each row's vectors to the padded batch, and the SFT
trainer steers its loss pass with them.
"""

from __future__ import annotations

import logging

import torch
from trl.trainer.utils import pad

from ao_calib.steering import SteeringBatch

log = logging.getLogger(__name__)


class SteeringMixin:
    """Put in front of a GRPOTrainer subclass: ``class Steered(SteeringMixin, SomeGRPOTrainer)``."""

    shares_prompt_prefix = False  # the fast path's prefill places the vectors by position in whole prompts

    def __init__(self, *args, steering, **kwargs):
        super().__init__(*args, **kwargs)
        self.steering = steering
        self._scoring_rows: list[dict] | None = None  # the generation batch while TRL generates and scores it
        self._loss_batch: SteeringBatch | None = None  # the micro-batch's own steering during the loss pass

    def train(self, *args, **kwargs):
        output = super().train(*args, **kwargs)
        # Per process (each logs to its own file in a multi-process run): the rows whose placeholders were checked.
        log.info("steering: %d rows checked in %d steered passes on this process", self.steering.stats["checked_rows"],
                 self.steering.stats["passes"])
        return output

    def _generate_and_score_completions(self, inputs):
        self._scoring_rows = inputs
        try:
            output = super()._generate_and_score_completions(inputs)
        finally:
            self._scoring_rows = None
        injected = self.steering.batch_for(inputs, output["prompt_ids"])
        device = output["prompt_ids"].device
        output["steer_vectors"] = injected.vectors.to(device)
        output["steer_positions"] = injected.positions.to(device)
        return output

    def _generate_single_turn(self, prompt_ids, *args, **kwargs):
        # Rebuild the left-padded prompt tensor exactly as TRL's generate path does, to place the vectors.
        padded = pad([torch.tensor(ids) for ids in prompt_ids], padding_value=self._tokenizer.pad_token_id,
                     padding_side="left", pad_to_multiple_of=self.pad_to_multiple_of)
        injected = self.steering.batch_for(self._scoring_rows, padded)
        if self._generates_fast(*args[:2]):
            # The fast path steers its own prefill, on the model it generates with (see _prefill_context).
            self._generation_batch = injected
            try:
                return super()._generate_single_turn(prompt_ids, *args, **kwargs)
            finally:
                self._generation_batch = None
        with self.steering.context(self.model, injected, "generation"):
            return super()._generate_single_turn(prompt_ids, *args, **kwargs)

    def _prefill_inputs(self, batch: int) -> list[int]:
        """Which activations each row of the generation batch gets, as the index of the first row in a run of
        consecutive rows with the same vectors: the same question about two texts has the same prompt ids, and
        must not share one prefill."""
        injected, first = self._generation_batch, []
        for row in range(batch):
            same = row and (torch.equal(injected.vectors[row], injected.vectors[row - 1])
                            and torch.equal(injected.positions[row], injected.positions[row - 1]))
            first.append(first[-1] if same else row)
        return first

    def _prefill_context(self, model, rows: list[int]):
        """Steers the fast path's prefill pass over ``rows`` of the generation batch (one row per distinct prompt
        when the prefill is shared); decode steps run after the context has closed."""
        index = torch.tensor(rows)
        batch = self._generation_batch
        return self.steering.context(model, SteeringBatch(batch.vectors[index], batch.positions[index]), "generation")

    def _compute_loss(self, model, inputs):
        self._loss_batch = SteeringBatch(inputs["steer_vectors"], inputs["steer_positions"])
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self._loss_batch = None

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           **kwargs):
        if any(isinstance(v, torch.Tensor) for v in kwargs.values()):
            raise NotImplementedError("steered GRPO supports text-only inputs (no images)")
        if self._loss_batch is not None:
            injected, kind = self._loss_batch, "loss"
        else:  # old-policy or reference log-probs of the generation batch being scored
            injected, kind = self.steering.batch_for(self._scoring_rows, input_ids), "scoring"
        size = batch_size or input_ids.size(0)
        logps, entropies, aux = [], [], []
        for start in range(0, input_ids.size(0), size):
            end = min(start + size, input_ids.size(0))
            with self.steering.context(model, injected.rows(start, end), kind):
                chunk = super()._get_per_token_logps_and_entropies(
                    model, input_ids[start:end], attention_mask[start:end], logits_to_keep, None, **kwargs)
            logps.append(chunk[0])
            if chunk[1] is not None:
                entropies.append(chunk[1])
            if chunk[2] is not None:
                aux.append(chunk[2])
        return (torch.cat(logps), torch.cat(entropies) if entropies else None,
                torch.stack(aux).mean() if aux else None)



class SteeringCollator:
    """Pads like the trainer's own collator, then attaches each row's activations at the placeholders of its
    padded ids (``steer_vectors``, ``steer_positions``)."""

    def __init__(self, base, steering):
        self.base, self.steering = base, steering

    def __call__(self, examples):
        batch = self.base(examples)
        injected = self.steering.batch_for(examples, batch["input_ids"])
        batch["steer_vectors"], batch["steer_positions"] = injected.vectors, injected.positions
        return batch
