"""What every room uses: the errors a user can act on, atomic file writes and the line-numbered JSON-lines reader, and
the settings dataclass base (default, help and check in one place)."""
