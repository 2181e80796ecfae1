"""``eval.confidence_decoding=expected`` (or ``mean``): greedy evaluation that states, in the tag, the number of the
task's scale nearest the mean of the model's own distribution over that scale (``mean``: that mean itself, rounded to
a whole number), instead of the most likely number.

The calibration reward charges a stated confidence with ``λ·(conf − informativeness)²``; under the model's own
belief about the number, the statement with the least expected penalty is that belief's mean (the Bayes act of a
squared loss), not its mode. Greedy decoding writes the mode. The two differ where the model's mass is spread
over several numbers, as it is on rows it cannot tell apart (an oracle that does not know whether this text names
the city asked about puts some mass on 50 and some on 80), and the warm-up's two-hot term
(``warmup.calibration_loss_form=two_hot``) trains exactly that mean: its target is two neighbouring numbers whose
mean is the chance of being right, so the mode is off it by up to one step of the scale.

How: a logits processor in ``model.generate``. Once a row's generated text ends with the tag's opening
(``[epistemic status:``, up to the number's first token), the next token is forced to the first token of the scale
number nearest the mean of the softmax over the scale's first tokens (renormalised: mass on tokens that begin no
scale number is left out), then the number's remaining tokens (``100`` is three digits on SmolLM2); the rest of the
answer is greedy as before, conditioned on the stated number. Rows that never write the tag are left alone.

``mean`` states the mean itself, rounded to a whole number 0-100 and written with the tokens the tokenizer gives it,
then the tag's closing bracket. Snapped to a scale of steps of 10, a mean of 0.66 is stated as 0.7 (up to half a step
of error on every row), and all the rows of one scale number are tied for every ranking the number is scored by.
"""

from __future__ import annotations

import torch
from transformers import LogitsProcessor

from ao_calib.calibration.contract import (
    confidence_span,
    format_epistemic_status,
    number_tokens,
)
from ao_calib.core.errors import AOCalibError


class ExpectedNumber:
    """The token plan of a scale of numbers (0-100) in the tag: the tag's opening tokens, for each scale number its
    first token (one per number, checked), and the tokens of every number the plan may state: the scale's, or with
    ``exact`` every whole number 0-100."""

    def __init__(self, tokenizer, scale, exact: bool = False) -> None:
        scale = sorted({int(n) for n in scale})
        setting = "eval.confidence_decoding=" + ("mean" if exact else "expected")
        if not scale:
            raise AOCalibError(f"{setting} needs the numbers the task teaches its model to state; this task gives none")
        first = number_tokens(tokenizer, scale, setting=setting)
        self.setting = setting
        self.exact = exact
        self.prefix = tokenizer(first.prefix, add_special_tokens=False)["input_ids"]
        self.numbers = torch.tensor([float(number) for number in scale])
        # per number that may be stated, its tokens; the scale's first tokens are where the mean is read from
        self.tokens = {number: self._number_ids(tokenizer, number) for number in (range(101) if exact else scale)}
        self.first_ids: list[int] = [self.tokens[number][0] for number in scale]

    def _number_ids(self, tokenizer, number: int) -> list[int]:
        """The tokens that write ``number`` in its tag, checked to follow the tag's opening as ``prefix`` has it.
        With ``exact`` the tag's closing bracket too, where a token of its own writes it: most whole numbers are
        ones the model was never taught to state, and after one the tiny oracle went on without the bracket
        (``[epistemic status: 63 Yes``), a tag whose answer nothing reads as the oracle's."""
        tag = format_epistemic_status(number, "Yes")
        encoded = tokenizer(tag, add_special_tokens=False, return_offsets_mapping=True)
        spans = list(zip(encoded["input_ids"], encoded["offset_mapping"]))
        start, end = confidence_span(tag)
        ids = [token for token, (a, b) in spans if a < end and b > start]
        bracket = [token for token, (a, b) in spans if (a, b) == (end, end + 1) and tag[a] == "]"]
        opening = [token for token, (_, b) in spans if b <= start]
        if opening != self.prefix:
            raise AOCalibError(f"{self.setting}: this tokenizer writes the tag of {number} with another opening than "
                               f"the other numbers' ({tokenizer.decode(opening)!r}); the number's place cannot be "
                               "found from the text before it")
        return ids + bracket if self.exact else ids

    def choose(self, logits: torch.Tensor) -> int:
        """The number to state: the mean of ``logits``' softmax over the scale's first tokens, rounded to a whole
        number (``exact``) or to the scale's nearest number (a tie goes to the lower one)."""
        p = logits[self.first_ids].float().softmax(-1)
        mean = float(p @ self.numbers)
        if self.exact:
            return min(100, max(0, int(mean + 0.5)))
        return int(self.numbers[int((self.numbers - mean).abs().argmin())])

    def processor(self, prompt_length: int, rows: int) -> LogitsProcessor:
        """A fresh processor for one ``generate`` call on ``rows`` left-padded prompts of ``prompt_length``."""
        return _ExpectedNumberProcessor(self, prompt_length, rows)


class _ExpectedNumberProcessor(LogitsProcessor):
    def __init__(self, plan: ExpectedNumber, prompt_length: int, rows: int) -> None:
        self.plan = plan
        self.prompt_length = prompt_length
        self.prefix = torch.tensor(plan.prefix)
        self.pending: list[list[int] | None] = [None] * rows  # None: the tag's number not reached yet

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        generated = input_ids[:, self.prompt_length:]
        width = len(self.prefix)
        at_number = torch.zeros(len(self.pending), dtype=torch.bool)
        if generated.shape[1] >= width:
            at_number = (generated[:, -width:].cpu() == self.prefix).all(1)
        for row in range(scores.shape[0]):
            if self.pending[row] is None and at_number[row]:
                self.pending[row] = list(self.plan.tokens[self.plan.choose(scores[row])])
            if self.pending[row]:
                token = self.pending[row].pop(0)
                forced = torch.full_like(scores[row], -float("inf"))
                forced[token] = 0.0
                scores[row] = forced
        return scores


def expected_number_plan(task, tokenizer, decoding) -> ExpectedNumber | None:
    """The plan ``eval.confidence_decoding`` asks of ``task`` (None for ``most_likely``); refused, by key, for a
    task that names no scale of numbers. Built at start-up too, before the model loads."""
    decoding = getattr(decoding, "value", decoding)  # a str enum member, or its value
    if decoding not in ("expected", "mean"):
        return None
    scale = task.confidence_scale()
    if not scale:
        raise AOCalibError(f"eval.confidence_decoding={decoding}: task {task.name} names no scale of numbers its "
                           "model is taught to state in the tag (Task.confidence_scale): set "
                           "eval.confidence_decoding=most_likely")
    return ExpectedNumber(tokenizer, scale, exact=decoding == "mean")
