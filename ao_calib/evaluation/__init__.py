"""Held-out evaluation: generation (``generation``) and scoring, files and printed summary (``evaluate``).
``python -m ao_calib.eval`` re-evaluates a saved run."""

from ao_calib.evaluation.evaluate import evaluate
from ao_calib.evaluation.generation import generate_completions

__all__ = ["evaluate", "generate_completions"]
