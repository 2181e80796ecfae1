"""``python -m ao_calib.config.settings_doc``: the settings reference page (markdown, every key with help text), printed,
or written to a file with ``--output PATH`` (``--output docs/reference/settings.md`` refreshes the docs site's
page; its folders are created); with ``--text``, the plain-text listing of every key. Both are generated from the
schemas' field metadata (``ao_calib.config.help_text``), so they cannot drift from the code."""

from __future__ import annotations

import argparse
from pathlib import Path

from ao_calib.config.compose import register_schemas
from ao_calib.config.help_text import settings_page, settings_text

DOCS_PAGE = Path("docs") / "reference" / "settings.md"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ao_calib.config.settings_doc", description=__doc__.split("\n\n")[0])
    parser.add_argument("--text", action="store_true", help="plain text instead of markdown")
    parser.add_argument("--output", "-o", type=Path, help=f"write to this file (e.g. {DOCS_PAGE}) instead of stdout")
    args = parser.parse_args(argv)
    register_schemas()
    text = settings_text() + "\n" if args.text else settings_page()
    if args.output is None:
        print(text, end="")
    else:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
