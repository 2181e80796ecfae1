"""The LM head of the training passes (``lm_head``, every trainer).

TRL's trainers patch the model's forward with a fused LM head (``trl.trainer.utils.add_fused_lm_head``): with
``fused_lm_head=True`` the forward returns per-token log-probabilities, computed in vocabulary tiles without the full
logits. On a GPU the tiles are a Triton kernel; elsewhere they are folded in torch, every position is projected
(the masked ones too), and the projection is run again in the backward. On a CPU that costs more than the logits
themselves: a step of the quickstart's warm-up took 2.7x as long with it, a SmolLM2-135M step 1.2-1.5x (BENCHMARKS.md,
``bench.lm_head``). ``full`` keeps TRL's forward and its outputs (``FusedCausalLMOutput``), and computes them from the
logits of the positions that are scored only, with plain autograd; ``auto`` does that off CUDA/XPU."""

from __future__ import annotations

import functools
import logging
import types

import torch
from trl.trainer.utils import FusedCausalLMOutput

from ao_calib.trainers.config import LMHead

log = logging.getLogger(__name__)

# Config attributes that scale the logits before the softmax and that this head does not apply: a model that sets
# one keeps TRL's fused head (which applies them)
_UNHANDLED_SCALES = ("logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


def uses_full_logits(choice: LMHead | str, device: torch.device) -> bool:
    choice = LMHead(choice)
    if choice == LMHead.auto:
        return device.type not in ("cuda", "xpu")
    return choice == LMHead.full


def install_full_logits(model, temperature: float = 1.0, cast_lm_head_to_fp32: bool = False) -> bool:
    """Wrap ``model.forward`` (TRL's fused forward, installed by the trainer) so that ``fused_lm_head=True`` is
    answered from the scored positions' logits: ``log_probs``, ``entropy`` and ``is_top1`` (the fields TRL's SFT,
    GRPO, RLOO and ao_calib's PPO read), ``label_mask`` and ``loss``, at ``temperature``. Other calls go to the
    wrapped forward unchanged. False (and nothing changes) for a model this head does not cover: one whose config
    scales the logits, or a mixture of experts (its router loss comes with TRL's head)."""
    text_config = model.config.get_text_config()
    unhandled = [name for name in _UNHANDLED_SCALES if getattr(text_config, name, None) is not None]
    if unhandled or getattr(text_config, "output_router_logits", False):
        log.info("lm_head: %s keeps TRL's fused head (%s)", type(model).__name__,
                 f"its config sets {unhandled}" if unhandled else "a mixture of experts")
        return False
    softcap = getattr(text_config, "final_logit_softcapping", None)
    wrapped = model.forward

    @functools.wraps(type(model).forward)  # generate validates its kwargs against the signature
    def forward(self, *args, fused_lm_head=False, labels=None, shift_labels=None, num_items_in_batch=None, **kwargs):
        head = self.get_output_embeddings()
        if not fused_lm_head or _sharded(head.weight):
            passed = {"fused_lm_head": fused_lm_head or None, "labels": labels, "shift_labels": shift_labels,
                      "num_items_in_batch": num_items_in_batch}
            return wrapped(*args, **kwargs, **{key: value for key, value in passed.items() if value is not None})
        kwargs["use_cache"] = False  # as TRL's head: a training pass keeps no cache
        hidden = self.base_model(*args, **kwargs).last_hidden_state
        if shift_labels is None:  # position t predicts token t + 1
            hidden, labels = hidden[:, :-1], labels[:, 1:]
        else:
            labels = shift_labels
        hidden, labels = hidden.to(head.weight.device), labels.to(head.weight.device)
        mask = labels != -100
        scored = hidden[mask]
        weight, bias = head.weight, head.bias
        if cast_lm_head_to_fp32:
            scored, weight = scored.float(), weight.float()
            bias = None if bias is None else bias.float()
        logits = torch.nn.functional.linear(scored, weight, bias).float()
        if softcap is not None:
            logits = torch.tanh(logits / softcap) * softcap
        log_softmax = torch.log_softmax(logits / temperature, dim=-1)
        target = labels[mask]
        picked = log_softmax.gather(-1, target.unsqueeze(-1)).squeeze(-1)
        entropy = -(log_softmax.exp() * log_softmax).sum(-1)
        is_top1 = logits.argmax(-1) == target  # the first of tied maxima, as TRL counts it

        def spread(values: torch.Tensor) -> torch.Tensor:  # back to [batch, positions], 0 where unscored
            # masked_scatter keeps the output connected to the graph when no position is scored, as TRL's does
            return values.new_zeros(mask.shape).masked_scatter(mask, values)

        log_probs = spread(picked)
        loss = -log_probs.sum() / (mask.sum().clamp(min=1) if num_items_in_batch is None else num_items_in_batch)
        return FusedCausalLMOutput(loss=loss, log_probs=log_probs, entropy=spread(entropy), is_top1=spread(is_top1),
                                   label_mask=mask)

    forward.full_logits = True  # what apply_lm_head installed, for a look at a built trainer
    model.forward = types.MethodType(forward, model)
    return True


def _sharded(weight: torch.Tensor) -> bool:
    """A head sharded by FSDP2 (a DTensor) or DeepSpeed ZeRO-3 (gathered only inside TRL's head): left to TRL."""
    from torch.distributed.tensor import DTensor

    if isinstance(weight, DTensor):
        return True
    from transformers.integrations.deepspeed import is_deepspeed_zero3_enabled

    return is_deepspeed_zero3_enabled()


def apply_lm_head(trainer, choice: LMHead | str) -> str:
    """After a TRL trainer is built (its fused head installed on the policy and on any reference model): the head
    ``choice`` asks for on this trainer's device; returns the one in use (``full`` or ``fused``)."""
    from ao_calib.trainers.common import peft_base

    policy = peft_base(trainer.model)
    device = policy.get_output_embeddings().weight.device
    if not uses_full_logits(choice, device):
        return LMHead.fused.value
    temperature = float(getattr(trainer, "temperature", 1.0))
    cast = bool(getattr(trainer.args, "cast_lm_head_to_fp32", False))
    installed = install_full_logits(policy, temperature, cast)
    reference = getattr(trainer, "ref_model", None)
    if installed and reference is not None:
        install_full_logits(peft_base(reference), temperature, cast)
    return LMHead.full.value if installed else LMHead.fused.value
