"""The confidences the stated one must beat: the oracle's own answer probability (Platt-scaled), and the field's other methods, per dataset."""
