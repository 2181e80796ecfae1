"""Evaluation metrics, named by component."""
