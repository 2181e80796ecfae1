"""What several test modules share (paths, running a command, finished tiny runs, builders), imported from here:
tests/conftest.py holds only fixtures and pytest hooks, and no test module imports another."""
