"""A linear probe on the activations an oracle reads: the reading ceiling its answers and confidence are set beside.

L2-regularised logistic regression (torch, LBFGS), fitted on the training rows' activation vectors with their
yes/no labels and scored on the test rows. Its objective is scikit-learn's ``LogisticRegression(C=c)``:
``½‖w‖² + c·Σ log-loss``, the intercept unpenalised; features are standardised with the training rows' mean and
spread first (residual streams carry a few dimensions of far larger scale than the rest). The probe answers the
class it finds likelier, with that class's probability as its confidence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ao_calib.judges.label import yes_no


def mean_vectors(vectors: Sequence[torch.Tensor]) -> torch.Tensor:
    """(N, d): each row's (K, d) vectors averaged over their K positions. Pass the positions the oracle reads (an
    activation store already holds only those: a ``skip_first`` token is never in it)."""
    if not len(vectors):
        raise ValueError("mean_vectors needs at least one row's vectors")
    return torch.stack([torch.as_tensor(v).double().reshape(-1, torch.as_tensor(v).shape[-1]).mean(0)
                        for v in vectors])


def yes_labels(answers: Sequence[str]) -> np.ndarray:
    """1 for a yes answer and 0 for a no (``yes_no``); a ValueError names the first row that is neither."""
    labels = []
    for index, answer in enumerate(answers):
        outcome = yes_no(answer or "")
        if outcome is None:
            raise ValueError(f"row {index}: the label {answer!r} is neither yes nor no")
        labels.append(float(outcome == "yes"))
    return np.asarray(labels)


@dataclass(frozen=True)
class LinearProbe:
    weight: torch.Tensor  # (d,), on standardised features
    bias: float
    mean: torch.Tensor  # (d,) training feature mean
    scale: torch.Tensor  # (d,) training feature spread (1 where a feature is constant)

    @classmethod
    def fit(cls, features, labels, c: float = 1.0, standardise: bool = True, max_iter: int = 500) -> LinearProbe:
        """Fitted on (N, d) ``features`` and 0/1 ``labels``; ``c`` is the inverse L2 strength (scikit-learn's C)."""
        x = torch.as_tensor(np.asarray(features), dtype=torch.float64)
        y = torch.as_tensor(np.asarray(labels), dtype=torch.float64)
        if x.ndim != 2 or y.shape != (x.shape[0],):
            raise ValueError(f"features {tuple(x.shape)} must be (N, d) and labels {tuple(y.shape)} (N,)")
        if not ((y == 0) | (y == 1)).all():
            raise ValueError("labels must be 0 or 1")
        if y.min() == y.max():
            raise ValueError(f"the probe needs both classes among its training labels; all {x.shape[0]} are "
                             f"{int(y[0])}")
        if c <= 0:
            raise ValueError(f"c must be positive, got {c}")
        mean = x.mean(0) if standardise else torch.zeros(x.shape[1], dtype=torch.float64)
        scale = x.std(0, unbiased=False) if standardise else torch.ones(x.shape[1], dtype=torch.float64)
        scale = torch.where(scale > 0, scale, torch.ones_like(scale))
        z = (x - mean) / scale
        params = torch.zeros(x.shape[1] + 1, dtype=torch.float64, requires_grad=True)
        optimiser = torch.optim.LBFGS([params], max_iter=max_iter, tolerance_grad=1e-10, tolerance_change=1e-14,
                                      history_size=20, line_search_fn="strong_wolfe")

        def closure():
            optimiser.zero_grad()
            logits = z @ params[:-1] + params[-1]
            # the mean log-loss plus ‖w‖²/(2cN): scikit-learn's objective divided by cN, the same minimiser
            loss = (torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
                    + params[:-1].square().sum() / (2 * c * x.shape[0]))
            loss.backward()
            return loss

        optimiser.step(closure)
        params = params.detach()
        return cls(params[:-1], float(params[-1]), mean, scale)

    def probability_yes(self, features) -> np.ndarray:
        x = torch.as_tensor(np.asarray(features), dtype=torch.float64)
        return torch.sigmoid((x - self.mean) / self.scale @ self.weight + self.bias).numpy()

    def answer(self, features) -> tuple[np.ndarray, np.ndarray]:
        """(1/0 predicted class, the probability of the predicted class) per row; a tie at 0.5 answers yes."""
        p = self.probability_yes(features)
        predicted = (p >= 0.5).astype(float)
        return predicted, np.where(predicted == 1, p, 1 - p)


@dataclass(frozen=True)
class ProbeScores:
    correct: np.ndarray  # 0/1 per test row
    confidence: np.ndarray  # the probability of the class the probe answered
    accuracy: float


def probe_baseline(train_features, train_labels, test_features, test_labels, c: float = 1.0) -> ProbeScores:
    """The probe fitted on the training rows and scored on the test rows: its correctness and confidence per row."""
    probe = LinearProbe.fit(train_features, train_labels, c=c)
    predicted, confidence = probe.answer(test_features)
    correct = (predicted == np.asarray(test_labels, dtype=float)).astype(float)
    return ProbeScores(correct, confidence, float(correct.mean()) if correct.size else float("nan"))
