"""Activation steering: reading a model's residual stream (``activations``), writing vectors back into it
(``inject``), and finding the decoder layers of each architecture (``layout``)."""

from ao_calib.steering.inject import MODES, Steering, SteeringBatch, SteeringError, apply_steering, steer

__all__ = ["MODES", "Steering", "SteeringBatch", "SteeringError", "apply_steering", "steer"]
