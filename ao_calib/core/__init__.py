"""What every room uses: the errors a user can act on, atomic file writes and the line-numbered JSON-lines reader,
the settings dataclass base (default, help and check in one place), the plug-in base schemas, the commands'
option parser, and a row's chat prompt as the model reads it before its answer."""
