"""GRPO's loss with one forward pass per distinct prompt (``trainer.shared_prefix=true``).

TRL 1.16 scores a micro-batch of completions by running every row's prompt and completion through the model, so
a prompt shared by a group of G completions is run G times, with grad. On a CPU every pass costs its tokens, and a
function-calling prompt (~300-400 tokens of function docs) dwarfs its completion (~30-70 tokens): most of a GRPO
step is the same prompt, run again. This path instead, for each micro-batch:

* runs each distinct prompt once (all but its last token) through the backbone, with grad, keeping its KV cache;
* gives every row its prompt's cache (``batch_select_indices``: an index, so the gradient of the G rows flows back
  into the one prompt pass and sums there, as it would over G separate passes);
* runs each row's last prompt token and completion through the model's own forward with TRL's fused LM head
  (``shift_labels``), so the log-probabilities, the temperature and the entropy are TRL's own.

The result is the same log-probabilities and gradients as TRL's path (tests/trainers/test_shared_prefix.py compares them),
up to float rounding. Positions are the same too: TRL passes no position ids, so a row's positions are its column
indices in the left-padded batch, which the cache's length reproduces.

For the prompts of a micro-batch to repeat, the rows of a generation batch are shuffled by prompt, not one by one
(``shuffle_by_prompt``): each prompt's rows stay together, and the prompts and the rows within each prompt are
drawn in a random order. Every loss TRL offers but ``bnpo`` weighs a row the same whichever micro-batch holds it,
and with ``num_iterations=1`` and ``steps_per_generation`` equal to the gradient accumulation all micro-batches of a
generation make one optimiser step, so the step is the same.

Not for: models trained with gradient checkpointing (the backbone then returns no cache), tasks that inject
activations (the steering hooks index the rows of a full pass), FSDP/DeepSpeed (the prompt pass calls the
backbone directly), images, MoE load-balancing losses. ``ao_calib.config.checks.check_shared_prefix`` refuses the first
two at start-up; the trainer refuses the others when it is built.
"""

from __future__ import annotations

import torch
from trl.trainer.utils import split_tensor_dict

from ao_calib.models.fast_generation import cache_keyword
from ao_calib.steering.layout import unwrap


def prompt_groups(prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(first row of each distinct prompt, each row's prompt index): rows are the same prompt when their ids and
    padding are the same."""
    keyed = torch.where(prompt_mask.bool(), prompt_ids, torch.full_like(prompt_ids, -1))
    _, index = torch.unique(keyed, dim=0, return_inverse=True)
    rows = torch.arange(index.numel(), device=index.device)
    first = torch.full((int(index.max()) + 1,), index.numel(), device=index.device, dtype=rows.dtype)
    first = first.scatter_reduce(0, index, rows, reduce="amin")
    return first, index


def shared_prefix_logps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, logits_to_keep: int,
                        compute_entropy: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Per-token log-probabilities (and entropies) of the last ``logits_to_keep`` tokens of each row, as TRL's
    ``_get_per_token_logps_and_entropies`` computes them on a model with TRL's fused LM head, with each distinct
    prompt run once. ``input_ids``: left-padded prompts, then right-padded completions."""
    split = input_ids.size(1) - logits_to_keep - 1  # the prefix: every prompt column but the last
    first, index = prompt_groups(input_ids[:, : split + 1], attention_mask[:, : split + 1])
    backbone = unwrap(model).base_model  # LoRA layers live inside it: the prefix pass trains them as well
    cache_key = cache_keyword(backbone)
    prefix = backbone(input_ids=input_ids[first, :split], attention_mask=attention_mask[first, :split],
                      use_cache=True)
    cache = getattr(prefix, cache_key, None)
    if cache is None:  # gradient checkpointing turns the cache off in training mode
        raise RuntimeError("trainer.shared_prefix=true: the model returned no KV cache (gradient checkpointing?); "
                           "set trainer.shared_prefix=false")
    cache.batch_select_indices(index)
    tail = input_ids[:, split:]  # the last prompt token predicts the first completion token
    labels = torch.cat([tail[:, 1:], tail.new_full((tail.size(0), 1), -100)], dim=1)
    labels = labels.masked_fill(torch.cat([attention_mask[:, split + 1:], attention_mask.new_zeros(
        (tail.size(0), 1))], dim=1) == 0, -100)
    out = model(input_ids=tail, attention_mask=attention_mask, shift_labels=labels, fused_lm_head=True,
                **{cache_key: cache})
    logps = out.log_probs[:, :logits_to_keep]
    entropy = out.entropy[:, :logits_to_keep] if compute_entropy else None
    return logps, entropy


def shuffle_by_prompt(batch: dict, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor) -> dict:
    """The rows of a generation batch in a random order that keeps each prompt's rows together: the prompts in a
    random order, and each prompt's rows in a random order (torch's global generator, as TRL's shuffle)."""
    _, index = prompt_groups(prompt_ids, prompt_mask)
    prompt_rank = torch.randperm(int(index.max()) + 1, device=index.device)[index]
    within = torch.randperm(index.numel(), device=index.device)
    order = torch.argsort(prompt_rank * index.numel() + within)
    return {key: _take(value, order) for key, value in batch.items()}


def _take(value, order: torch.Tensor):
    if isinstance(value, torch.Tensor) and value.ndim > 0:
        return value[order.to(value.device)]
    if isinstance(value, list):
        return [value[i] for i in order.tolist()]
    return value  # scalars and None: the same for every row


class SharedPrefixMixin:
    """For TRL's GRPOTrainer: the loss's log-probabilities with one prefix pass per distinct prompt of a
    micro-batch (``shared_prefix_logps``), and generation batches shuffled by prompt so that micro-batches hold
    whole groups. ``shared_prefix=False`` leaves TRL's path untouched."""

    def __init__(self, *args, shared_prefix: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        self.shared_prefix = shared_prefix
        if not shared_prefix:
            return
        if getattr(self, "is_fsdp_enabled", False) or getattr(self, "is_deepspeed_enabled", False):
            raise ValueError("trainer.shared_prefix=true runs on one device or under DDP (its prompt pass calls the "
                             "backbone directly); set trainer.shared_prefix=false under FSDP or DeepSpeed")
        if getattr(unwrap(self.model).config.get_text_config(), "output_router_logits", False):
            raise ValueError("trainer.shared_prefix=true does not compute MoE load-balancing losses; set "
                             "trainer.shared_prefix=false")

    def _prepare_inputs(self, generation_batch):
        # TRL's own buffering, with its row shuffle replaced by shuffle_by_prompt (text-only batches)
        if not (self.shared_prefix and self.model.training):
            return super()._prepare_inputs(generation_batch)
        generate_every = self.args.steps_per_generation * self.num_iterations
        if self._step % generate_every == 0 or self._buffered_inputs is None:
            batch = self._generate_and_score_completions(generation_batch)
            batch = shuffle_by_prompt(batch, batch["prompt_ids"], batch["prompt_mask"])
            self._buffered_inputs = split_tensor_dict(batch, self.args.steps_per_generation)
        return self._buffered_inputs[self._step % self.args.steps_per_generation]

    def _get_per_token_logps_and_entropies(self, model, input_ids, attention_mask, logits_to_keep, batch_size=None,
                                           compute_entropy=False, compute_aux_loss=False, **kwargs):
        if not self.shared_prefix or input_ids.size(1) - logits_to_keep < 2:
            return super()._get_per_token_logps_and_entropies(
                model, input_ids, attention_mask, logits_to_keep, batch_size, compute_entropy=compute_entropy,
                compute_aux_loss=compute_aux_loss, **kwargs)
        if any(v is not None for v in kwargs.values()):
            raise NotImplementedError("trainer.shared_prefix=true supports text-only inputs (no images)")
        if getattr(self, "steering", None) is not None:  # refused at start-up; here for direct use
            raise NotImplementedError("trainer.shared_prefix=true cannot steer: the hooks index a full pass's rows")
        size = batch_size or input_ids.size(0)
        logps, entropies = [], []
        for start in range(0, input_ids.size(0), size):
            end = min(start + size, input_ids.size(0))
            with self.accelerator.autocast():
                chunk, entropy = shared_prefix_logps(model, input_ids[start:end], attention_mask[start:end],
                                                     logits_to_keep, compute_entropy)
            logps.append(chunk)
            entropies.append(entropy)
        return torch.cat(logps), torch.cat(entropies) if compute_entropy else None, None
