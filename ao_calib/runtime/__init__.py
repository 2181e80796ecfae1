"""The processes a run lives in: ranks and their barriers, sharding, signals, offline mode."""
