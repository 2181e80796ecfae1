"""Credit for the stated confidence in group-relative training (``task.calibration.credit``).

GRPO gives every token of a completion the completion's advantage. In ``[epistemic status: NN] answer`` the
number NN is written before the answer, so most of the spread of ``informativeness − λ·(NN/100 −
informativeness)²`` within a group comes from whether the answer turned out right, which the number did not
choose. For the tokens of NN this mixin uses a calibration term alone, normalised within the group as TRL
normalises rewards; every other token keeps TRL's advantage:

- ``calibration``: ``−(NN/100 − informativeness)²`` of the completion's own answer;
- ``group``: ``−(NN/100 − m)²`` where ``m`` is the mean informativeness of the *other* completions of the group:
  the oracle's hit rate on that question with those activations, which does not depend on this completion's
  number. The term is linear in the informativeness, so ``m`` gives it the same expectation up to a constant per
  group (the same best confidence, the chance of being right) without the coin flip of one answer.
- ``probability``: ``−(NN/100 − p)²`` where ``p`` is that chance computed instead of counted: each distinct answer
  the group wrote after a valid tag, its mean probability under the sampling policy (the log-probs TRL scores
  completions with, at the sampling temperature) times its mean informativeness, summed over the answers. An
  answer's probability includes the token that closes the completion (the end of turn), so that an answer and a
  longer one it starts ("Yes", "Yes.") are disjoint events; a completion cut off before its end gives none. With a
  handful of completions at a low temperature ``m`` is nearly always 0 or 1 (a policy right 80 % of the time on
  a question is seen right 7 times in 7 about a fifth of the time); ``p`` is graded and has no draw noise. Answers
  the group did not write count as wrong, so ``p`` is a lower bound, exact when every answer with mass was seen
  (a yes/no question answered both ways). Same target for every completion of the group.

What all three give up: credit to the number for any effect it has on the answer written after it.

``task.calibration.number_only`` zeroes the other tokens' advantage as well: the group-relative step then trains
the number alone, and the answers stay what the warm-up taught (up to the shared weights and the KL term).

The terms are centred within each group and scaled as ``task.calibration.credit_scale`` says (by default by the
batch's std, not each group's, whatever TRL's ``scale_rewards``): the target ``m`` is often 0 or 1 for a whole
group, and a per-group std rescales ``−(NN/100 − 1)²`` and ``−(NN/100)²`` to the same spread, so a group pushing
the number up pushes as hard as one pushing it down; the squared error's pull towards the hit rate is lost.
"""

from __future__ import annotations

import math
import zlib

import torch

from ao_calib.calibration.contract import confidence_span, tag_span


def group_normalised(values: torch.Tensor, group_size: int, scale: str, eps: float = 1e-4) -> torch.Tensor:
    """Advantages of ``values`` (NaN: no value) within consecutive groups of ``group_size``, as TRL's
    ``scale_rewards`` does it (``group``: divided by the group's std, ``batch``: by the batch's, ``none``: not);
    0 where a value or its whole group is missing."""
    grouped = values.view(-1, group_size)
    present = ~torch.isnan(grouped)
    count = present.sum(dim=1, keepdim=True)
    filled = torch.where(present, grouped, torch.zeros_like(grouped))
    mean = filled.sum(dim=1, keepdim=True) / count.clamp(min=1)
    centred = torch.where(present, grouped - mean, torch.zeros_like(grouped))
    if scale == "group":
        std = (centred.pow(2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
        centred = centred / (std + eps)
    elif scale == "batch":
        n = present.sum()
        centred = centred / ((centred.pow(2).sum() / (n - 1).clamp(min=1)).sqrt() + eps)
    elif scale != "none":
        raise ValueError(f"unknown reward scaling {scale!r}")
    return centred.view(-1)


def answer_probability_targets(informativeness: torch.Tensor, probability: torch.Tensor, answer: torch.Tensor,
                               group_size: int) -> torch.Tensor:
    """Per completion, its group's chance of a right answer under the policy's own probabilities (``probability``
    credit): Σ over the distinct answers ``a`` the group wrote of mean P(a) × mean informativeness(a). ``answer`` keys
    each completion's answer (equal keys: the same answer; -1: none, e.g. no valid tag), ``probability`` is the
    policy's probability of that answer after its own tag, the end token closing it included
    (``answer_probabilities``), so that distinct answers are disjoint events. Completions without a key, a
    probability or a judgment give nothing; NaN for a whole group that has no answer with both. Clipped to [0, 1]
    (the probabilities come after different tags, so their sum can pass 1 by a little)."""
    targets = torch.full_like(informativeness, float("nan"))
    for start in range(0, informativeness.numel(), group_size):
        seen: dict[int, tuple[list[float], list[float]]] = {}
        for i in range(start, start + group_size):
            key, q, info = int(answer[i]), float(probability[i]), float(informativeness[i])
            if key < 0 or math.isnan(q):  # no probability
                continue
            probs, infos = seen.setdefault(key, ([], []))
            probs.append(q)
            if not math.isnan(info):  # a masked judgment leaves the answer's probability, not its score
                infos.append(info)
        terms = [sum(probs) / len(probs) * sum(infos) / len(infos) for probs, infos in seen.values() if infos]
        if terms:
            targets[start:start + group_size] = min(max(sum(terms), 0.0), 1.0)
    return targets


def calibration_terms(confidence: torch.Tensor, informativeness: torch.Tensor, group_size: int, rule: str,
                      probability: torch.Tensor | None = None, answer: torch.Tensor | None = None) -> torch.Tensor:
    """The term each completion's number is credited with under ``rule`` (NaN where there is none: no tag, no
    judgment, or a group with no other judged completion). ``probability`` and ``answer``: what the
    ``probability`` rule reads (``answer_probability_targets``)."""
    if rule == "calibration":
        return -(confidence - informativeness).pow(2)
    if rule == "probability":
        if probability is None or answer is None:
            raise ValueError("credit rule 'probability' needs each completion's answer probability and answer key")
        return -(confidence - answer_probability_targets(informativeness, probability, answer, group_size)).pow(2)
    if rule != "group":
        raise ValueError(f"unknown credit rule {rule!r}")
    grouped = informativeness.view(-1, group_size)
    judged = ~torch.isnan(grouped)
    total = torch.where(judged, grouped, torch.zeros_like(grouped)).sum(dim=1, keepdim=True)
    others = judged.sum(dim=1, keepdim=True) - judged.long()
    own = torch.where(judged, grouped, torch.zeros_like(grouped))
    rate = ((total - own) / others).where(others > 0, torch.full_like(grouped, float("nan")))
    return -(confidence - rate.view(-1)).pow(2)


def confidence_token_mask(tokenizer, completion_ids: torch.Tensor, completion_mask: torch.Tensor) -> torch.Tensor:
    """1 on the tokens that write the number of each completion's tag (decoded as TRL decodes completions for
    the reward functions), 0 elsewhere and on completions without a valid tag."""
    return _span_token_mask(tokenizer, completion_ids, completion_mask, confidence_span)


def _after_tag(text: str) -> tuple[int, int] | None:
    span = tag_span(text)
    return None if span is None or not text[span[1]:].strip() else (span[1], len(text))


def answer_token_mask(tokenizer, completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                      end_ids) -> torch.Tensor:
    """1 on the tokens that write each completion's answer: everything after a valid tag, and the completion's
    last token when it is one of ``end_ids`` (the end of turn), so that the answer's probability is that of the
    answer ending there. 0 elsewhere, and on completions without a valid tag, without an answer, or cut off before
    an end token (where such an answer would have ended is unknown)."""
    mask = _span_token_mask(tokenizer, completion_ids, completion_mask, _after_tag)
    ends = torch.tensor(sorted(set(end_ids)), dtype=completion_ids.dtype, device=completion_ids.device)
    last = (completion_mask.cumsum(1) * completion_mask).argmax(1)  # the index of each row's last kept token
    closing = completion_ids.gather(1, last[:, None]).squeeze(1)
    closed = torch.isin(closing, ends) & completion_mask.bool().any(1) & mask.bool().any(1)
    mask = torch.where(closed[:, None], mask, torch.zeros_like(mask))
    mask[closed.nonzero().squeeze(1), last[closed]] = 1
    return mask


def answer_probabilities(tokenizer, completion_ids: torch.Tensor, completion_mask: torch.Tensor,
                         per_token_logps: torch.Tensor, end_ids) -> torch.Tensor:
    """Per completion, the probability of the answer it wrote after its tag, the end token closing it included
    (``answer_token_mask``), from the per-token log-probabilities of its tokens; NaN where it has none."""
    in_answer = answer_token_mask(tokenizer, completion_ids, completion_mask, end_ids).bool()
    logps = per_token_logps.float()
    probability = torch.where(in_answer, logps, torch.zeros_like(logps)).sum(1).exp()
    return probability.where(in_answer.any(1), torch.full_like(probability, float("nan")))


def _span_token_mask(tokenizer, completion_ids: torch.Tensor, completion_mask: torch.Tensor, span_of) -> torch.Tensor:
    """1 on the tokens whose decoded characters meet ``span_of(text)`` (a character span of the decoded
    completion, or None)."""
    mask = torch.zeros_like(completion_mask)
    for row, (ids, keep) in enumerate(zip(completion_ids.tolist(), completion_mask.tolist())):
        ids = [t for t, k in zip(ids, keep) if k]
        span = span_of(tokenizer.decode(ids, skip_special_tokens=True))
        if span is None:
            continue
        start, end = span
        # Token i covers the characters between the decoded lengths of the prefixes ids[:i] and ids[:i+1]; the
        # tag opens the completion, so for its number only the first few prefixes are decoded.
        before = 0
        for i in range(len(ids)):
            after = len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True))
            if after > start and before < end:
                mask[row, i] = 1
            if after >= end:
                break
            before = after
    return mask


class ConfidenceCreditMixin:
    """In front of a GRPOTrainer subclass. Active when one of its reward functions is a calibrated reward
    (``ao_calib.calibration.make_calibrated_reward``) whose rule's ``credit`` is not ``sequence``."""

    def _credited_reward(self):
        for fn in self.reward_funcs:
            rule = getattr(fn, "rule", None)
            if rule is not None and rule.credit != "sequence":
                return fn
        return None

    def _after_scoring(self, output: dict) -> dict:
        output = super()._after_scoring(output)
        reward = self._credited_reward()
        if reward is None:
            return output
        local = torch.tensor([[float("nan") if v is None else v for v in pair] for pair in reward.scored],
                             dtype=torch.float32, device=output["advantages"].device).view(-1, 2)
        scored = self.accelerator.gather(local)  # groups may straddle processes, as TRL's rewards do
        probability = answer = None
        if reward.rule.credit == "probability":
            probability, answer = (self.accelerator.gather(t)
                                   for t in self._answer_probabilities(output, reward.answers))
            self._metrics["train"]["calibration/credit_answer_probability"].append(probability.nanmean().item())
        terms = calibration_terms(scored[:, 0], scored[:, 1], self.num_generations, reward.rule.credit,
                                  probability, answer)
        advantages = group_normalised(terms, self.num_generations, reward.rule.credit_scale)
        n = len(reward.scored)
        output["confidence_advantages"] = advantages[self.accelerator.process_index * n:][:n]
        if reward.rule.number_only:  # every other token: no advantage (task.calibration.number_only)
            output["advantages"] = torch.zeros_like(output["advantages"])
        output["confidence_token_mask"] = confidence_token_mask(
            self.processing_class, output["completion_ids"], output["completion_mask"])
        self._metrics["train"]["calibration/confidence_advantage_std"].append(advantages.std().item())
        return output

    def _answer_probabilities(self, output: dict, answers: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
        """Per local completion, the sampling policy's probability of the answer it wrote after its tag, its end
        included (``answer_probabilities``; NaN when it has no tag, no answer or no end), and a key for that answer
        (a checksum of ``answers``, the answer the reward read in each local completion, equal across processes; -1
        when none). The log-probs are TRL's old-policy ones when it computed them, else one no-grad pass through
        the same method (steered like TRL's own scoring passes, at the sampling temperature)."""
        prompt_ids, completion_ids = output["prompt_ids"], output["completion_ids"]
        completion_mask = output["completion_mask"]
        logps = output.get("old_per_token_logps")
        if logps is None:
            with torch.no_grad():
                logps, _, _ = self._get_per_token_logps_and_entropies(
                    self.model, torch.cat([prompt_ids, completion_ids], dim=1),
                    torch.cat([output["prompt_mask"], completion_mask], dim=1), completion_ids.size(1),
                    batch_size=self.args.per_device_train_batch_size)
        probability = answer_probabilities(self.processing_class, completion_ids, completion_mask, logps,
                                           self.eos_token_ids)  # TRL's end tokens: where generation stops
        has_answer = ~probability.isnan()
        keys = [zlib.crc32(text.encode()) if answered else -1 for text, answered in zip(answers, has_answer.tolist())]
        return probability, torch.tensor(keys, dtype=torch.int64, device=probability.device)

    def _compute_loss(self, model, inputs):
        if "confidence_token_mask" in inputs:
            sequence = inputs["advantages"]
            if sequence.dim() == 1:
                sequence = sequence.unsqueeze(1)
            inputs = {**inputs, "advantages": torch.where(inputs["confidence_token_mask"].bool(),
                                                          inputs["confidence_advantages"].unsqueeze(1), sequence)}
        return super()._compute_loss(model, inputs)
