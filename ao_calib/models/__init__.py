"""Loading base models (hub, GGUF, tiny random models), and the merged copy generation uses."""
