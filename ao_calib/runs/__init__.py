"""Run directories: file layout, checkpoints and resume, and reading finished runs back."""
