"""The linear probe baseline: torch's L2 logistic regression against scikit-learn's on the same data."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler

from ao_calib.calibration.probe import LinearProbe, mean_vectors, probe_baseline, yes_labels


def _data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Features on very different scales (as a residual stream's are), labels from a noisy linear rule."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, d)) * rng.uniform(0.1, 50.0, size=d) + rng.normal(size=d) * 10
    w = rng.normal(size=d)
    y = (((x - x.mean(0)) / x.std(0)) @ w + rng.normal(size=n) * 2 > 0).astype(float)
    return x, y


@pytest.mark.parametrize("c", [0.05, 1.0])
def test_probe_matches_scikit_learn_logistic_regression(c):
    x, y = _data(240, 32, seed=1)
    train, test = slice(0, 160), slice(160, None)
    probe = LinearProbe.fit(x[train], y[train], c=c)
    scaler = StandardScaler().fit(x[train])
    reference = LogisticRegression(C=c, tol=1e-10, max_iter=10_000).fit(scaler.transform(x[train]), y[train])
    assert probe.weight.numpy() == pytest.approx(reference.coef_[0], abs=1e-5)
    assert probe.bias == pytest.approx(reference.intercept_[0], abs=1e-5)
    assert probe.probability_yes(x[test]) == pytest.approx(reference.predict_proba(scaler.transform(x[test]))[:, 1],
                                                           abs=1e-6)
    scores = probe_baseline(x[train], y[train], x[test], y[test], c=c)
    assert scores.accuracy == pytest.approx(reference.score(scaler.transform(x[test]), y[test]))
    p = reference.predict_proba(scaler.transform(x[test])).max(1)
    assert scores.confidence == pytest.approx(p, abs=1e-6)
    assert (scores.confidence >= 0.5).all()


def test_probe_without_standardising_matches_scikit_learn_on_raw_features():
    x, y = _data(120, 8, seed=2)
    x = x / x.std(0)  # raw features of one scale, so that the unstandardised fit converges as scikit-learn's does
    probe = LinearProbe.fit(x, y, c=0.5, standardise=False)
    reference = LogisticRegression(C=0.5, tol=1e-10, max_iter=10_000).fit(x, y)
    assert probe.weight.numpy() == pytest.approx(reference.coef_[0], abs=1e-5)
    assert probe.bias == pytest.approx(reference.intercept_[0], abs=1e-5)


def test_mean_vectors_average_each_rows_positions():
    a = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    b = torch.tensor([[5.0, -1.0]])
    assert mean_vectors([a, b]).tolist() == [[2.0, 4.0], [5.0, -1.0]]


def test_labels_and_refusals():
    assert yes_labels(["Yes", "no.", "YES"]).tolist() == [1.0, 0.0, 1.0]
    with pytest.raises(ValueError, match="row 1: the label 'Maybe'"):
        yes_labels(["Yes", "Maybe"])
    with pytest.raises(ValueError, match="both classes"):
        LinearProbe.fit(np.ones((4, 2)), np.ones(4))
    with pytest.raises(ValueError, match=r"\(N, d\)"):
        LinearProbe.fit(np.ones(4), np.array([0, 1, 0, 1]))


def test_probe_reads_a_tiny_models_extracted_activations(offline_env):
    """The plumbing on real activations: a tiny random-initialised model's residual stream, collected as the oracle
    collects it (every position but the first), averaged per prompt, tells prompts about cats from prompts about
    trains, on prompts the probe was not fitted on."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
    from ao_calib.steering.activations import PositionRule, extract_activations

    path = ensure_tiny_model(TinyModelSpec(), offline_env / "tiny_models")
    tokenizer, model = AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path)
    subjects = {"cat": 1.0, "train": 0.0}
    prompts = [(f"Tell me {adjective} facts about the {subject}.", label) for subject, label in subjects.items()
               for adjective in ("fun", "odd", "old", "new", "true", "short", "long", "rare")]
    acts = extract_activations(model, tokenizer, [p for p, _ in prompts], [2], PositionRule("full", skip_first=1))
    features = mean_vectors([a[2] for a in acts])
    labels = np.array([label for _, label in prompts])
    train = np.array([i % 8 < 5 for i in range(len(prompts))])
    scores = probe_baseline(features[train].numpy(), labels[train], features[~train].numpy(), labels[~train])
    assert features.shape == (len(prompts), model.config.hidden_size)
    assert scores.accuracy >= 0.8  # 6 held-out prompts; chance is 0.5
    assert scores.confidence.shape == (int((~train).sum()),)
