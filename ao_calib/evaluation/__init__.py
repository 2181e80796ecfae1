"""Held-out evaluation: its settings (``config``, light: the run's config imports them), generation
(``generation``) and scoring, files and printed summary (``evaluate``). ``python -m ao_calib.eval`` re-evaluates a
saved run."""
