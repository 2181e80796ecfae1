"""The classical confidence of a yes/no oracle, the baseline its stated confidence must beat: the probability the
model gives its own answer, read from its token probabilities (then recalibrated on a separate split, see
``ao_calib.calibration.recalibration``)."""

from __future__ import annotations

import torch

from ao_calib.calibration import format_epistemic_status, parse_epistemic_status
from ao_calib.core.chat import chat_prompt_text
from ao_calib.judges.label import yes_no

from ..rows.generate import generate_rows

ANSWERS = ("Yes", "No")


@torch.no_grad()
def own_answer_probabilities(model, tokenizer, rows: list[dict], completions: list[str], steering, *,
                             chat_template_kwargs: dict, batch_size: int = 16, one_pass: bool = True) -> list[float]:
    """For each row, P(the oracle's own answer) normalised over Yes and No, given the prompt (with its
    activations injected) and the oracle's own tag (confidence 50 when it wrote none). A completion that is
    neither Yes nor No counts as the likelier of the two.

    Where each answer is one token after the same prefix (SmolLM2, Qwen3), one pass over the prefix gives both
    answers' probabilities at its last position, ``batch_size`` rows at a time (right-padded, so every row's
    positions are those of its own pass); other rows score both full texts, one row at a time. Both read the same
    numbers: the answer tokens' summed log-probabilities after the prefix (``one_pass=False`` takes the second way
    on every row: ``bench.oracle_answer_probability`` times the two)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out: list[float | None] = [None] * len(rows)
    one_token = []  # (index, prefix ids, Yes id, No id, the chosen answer)
    try:
        for index, (row, completion) in enumerate(zip(rows, completions)):
            status = parse_epistemic_status(completion)
            prompt = chat_prompt_text(tokenizer, row["prompt"], chat_template_kwargs)
            texts = [prompt + format_epistemic_status(status.confidence, answer) for answer in ANSWERS]
            prefix = len(tokenizer(prompt + format_epistemic_status(status.confidence, "").rstrip(),
                                   add_special_tokens=False)["input_ids"])
            chosen = {"yes": 0, "no": 1}.get(yes_no(status.answer))
            ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
            if one_pass and all(len(i) == prefix + 1 for i in ids) and ids[0][:prefix] == ids[1][:prefix]:
                one_token.append((index, ids[0][:prefix], ids[0][prefix], ids[1][prefix], chosen))
                continue
            batch = tokenizer.pad({"input_ids": ids}, return_tensors="pt").to(device)
            injected = steering.batch_for([row, row], batch["input_ids"])
            with steering.context(model, injected, "baseline"):
                logits = model(**batch).logits.float()
            logprobs = torch.log_softmax(logits[:, :-1], dim=-1).gather(-1, batch["input_ids"][:, 1:, None])[..., 0]
            mask = batch["attention_mask"][:, 1:].clone()
            mask[:, : prefix - 1] = 0  # score the answer tokens only
            out[index] = _own(torch.softmax((logprobs * mask).sum(-1), dim=0).tolist(), chosen)
        for start in range(0, len(one_token), batch_size):
            chunk = one_token[start:start + batch_size]
            batch = tokenizer.pad({"input_ids": [c[1] for c in chunk]}, padding_side="right",
                                  return_tensors="pt").to(device)
            last = batch["attention_mask"].sum(-1) - 1
            kept = torch.unique(last)  # the LM head on these positions only
            injected = steering.batch_for([rows[c[0]] for c in chunk], batch["input_ids"])
            with steering.context(model, injected, "baseline"):
                logits = model(**batch, logits_to_keep=kept).logits
            at_last = logits[torch.arange(len(chunk), device=device), torch.searchsorted(kept, last)].float()
            logprobs = torch.log_softmax(at_last, dim=-1)
            answers = torch.tensor([[c[2], c[3]] for c in chunk], device=device)
            pairs = torch.softmax(logprobs.gather(-1, answers), dim=-1).tolist()
            for (index, *_, chosen), p in zip(chunk, pairs):
                out[index] = _own(p, chosen)
    finally:
        model.train(was_training)
    return out


def _own(p: list[float], chosen: int | None) -> float:
    return p[chosen] if chosen is not None else max(p)


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
