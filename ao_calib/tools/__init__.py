"""Tools a model calls during an episode: the Python sandbox (``sandbox``) and how a call looks in the
conversation TRL's tool loop reads (``chat_format``)."""
