"""The classical confidence of a yes/no oracle, the baseline its stated confidence must beat: the probability the
model gives its own answer, read from its token probabilities (then recalibrated on a separate split, see
``ao_calib.calibration.recalibration``)."""

from __future__ import annotations

import torch

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status
from ao_calib.judges.label import yes_no

from .generate import generate_rows

ANSWERS = ("Yes", "No")


@torch.no_grad()
def own_answer_probabilities(model, tokenizer, rows: list[dict], completions: list[str], steering, *,
                             chat_template_kwargs: dict) -> list[float]:
    """For each row, P(the oracle's own answer) normalised over Yes and No, given the prompt (with its
    activations injected) and the oracle's own tag (confidence 50 when it wrote none). A completion that is
    neither Yes nor No counts as the likelier of the two."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = []
    try:
        for row, completion in zip(rows, completions):
            status = parse_epistemic_status(completion)
            prompt = tokenizer.apply_chat_template(row["prompt"], tokenize=False, add_generation_prompt=True,
                                                   **chat_template_kwargs)
            texts = [prompt + format_epistemic_status(status.confidence, answer) for answer in ANSWERS]
            prefix = len(tokenizer(prompt + format_epistemic_status(status.confidence, "").rstrip(),
                                   add_special_tokens=False)["input_ids"])
            batch = tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(device)
            injected = steering.batch_for([row, row], batch["input_ids"])
            with steering.context(model, injected, "baseline"):
                logits = model(**batch).logits.float()
            logprobs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
            mask = batch["attention_mask"][:, 1:].clone()
            mask[:, : prefix - 1] = 0  # score the answer tokens only
            answer_logprob = (logprobs * mask).sum(-1)
            p = torch.softmax(answer_logprob, dim=0).tolist()
            chosen = {"yes": 0, "no": 1}.get(yes_no(status.answer))
            out.append(p[chosen] if chosen is not None else max(p))
    finally:
        model.train(was_training)
    return out


def fresh_rows(n_prompts: int, questions_per_prompt: int, kinds, seed: int, exclude: set[str]) -> list[dict]:
    """Generated rows over prompts none of which is in ``exclude`` (the run's train and test prompts): a split from
    the training distribution that neither training nor the held-out evaluation has seen."""
    rows, offset = [], 0
    while len({r["prompt"] for r in rows}) < n_prompts:
        batch = generate_rows(n_prompts, questions_per_prompt, kinds, seed + offset)
        seen = {r["prompt"] for r in rows} | exclude
        rows += [r for r in batch if r["prompt"] not in seen]
        offset += 1
    keep = set(list(dict.fromkeys(r["prompt"] for r in rows))[:n_prompts])  # the first n_prompts, in order
    return [r for r in rows if r["prompt"] in keep]
