"""What a run checks before anything heavy: the machine's resources, prompt lengths and reference lengths against their
budgets."""
