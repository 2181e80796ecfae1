"""Alerts in one place: what one is, the trainers' callback that fires them, the end-of-run conditions, and their
thresholds."""
