"""What a run and a sweep leave for people to read: the run summary and end-of-run screen (``summary``), wandb
(``wandb``), a run's training curves (``plot``), the sweep table and reward curves (``report``, and ``sweep``,
the Hydra callback that writes them when a sweep ends)."""
