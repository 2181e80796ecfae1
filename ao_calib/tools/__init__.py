"""Tools a model calls during an episode: the Python sandbox (``sandbox``)."""
