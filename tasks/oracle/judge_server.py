"""A judge for the oracle's offline presets (``experiment=oracle_seed_tiny``): an OpenAI-compatible server on
127.0.0.1 that grades an answer about a prompt of the offline generator by reading the text, as a real judge
would. It serves until stdin closes or ``--max-seconds`` pass::

    python -m ao_calib_tasks.oracle.judge_server --port 8011 &
    python -m ao_calib.run experiment=oracle_seed_tiny judge.api_base=http://127.0.0.1:8011/v1
"""

from __future__ import annotations

import re

from ao_calib.judges.label import yes_no
from ao_calib.judges.rule_server import ANSWER_LINE, main
from .rows.generate import true_answer

TEXT_BLOCK = re.compile(r"Text:\n<<<\n(.*?)\n>>>", re.S)
QUESTION_LINE = re.compile(r"^Question about the text:\s*(.*)$", re.M)


def generated_truth_rule(prompt_text: str) -> str:
    """Grades an oracle's yes/no answer about a prompt of the offline generator: it reads the text and the question
    (the oracle's default grading prompt) and works out the true answer. Right: 95, wrong: 5, no yes/no answer: 20;
    a question it cannot settle: 50."""
    text, question, answer = (TEXT_BLOCK.search(prompt_text), QUESTION_LINE.search(prompt_text),
                              ANSWER_LINE.findall(prompt_text))
    truth = true_answer(text.group(1), question.group(1)) if text and question else None
    said = yes_no(answer[-1]) if answer else None
    score = 50 if truth is None else 20 if said is None else 95 if said == truth.lower() else 5
    return f"The text settles the question as {truth!r}; the answer says {said!r}.\nSCORE: {score}"


if __name__ == "__main__":
    main(generated_truth_rule, "a judge for the oracle's offline presets: reads the generator's text (127.0.0.1)")
