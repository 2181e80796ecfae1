"""``python -m ao_calib.settings_doc``: README.md's settings table (markdown, between its ``settings table``
markers), or with ``--text`` what ``python -m ao_calib.run --help`` lists; both generated from the schemas' field
metadata (``ao_calib.cli_help``)."""

from __future__ import annotations

import sys

from ao_calib.cli_help import settings_markdown, settings_text
from ao_calib.config import register_schemas

if __name__ == "__main__":
    register_schemas()
    print(settings_text() if "--text" in sys.argv[1:] else settings_markdown(), end="")
