"""The config files' comments say what a value is for in one line and link the page that explains the choice; the
why and the measurements live in docs/, and every docs/ page a comment or help text names exists."""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest

from ao_calib.core.settings import HELP
from tests.helpers.configs import options
from tests.helpers.paths import CONF_DIR, PROJECT_ROOT
from tests.helpers.schemas import every_registered_schema

# Words a reader of conf/ cannot look up: round labels of past experiments, documents outside the project.
UNDEFINED = re.compile(r"QC\d+|design notes?|the issue|\bbed\b|\b(\w+th|first|second|third) round\b", re.I)
DOCS_LINK = re.compile(r"docs/[\w/.-]+\.md")


def conf_files():
    return sorted(p for p in CONF_DIR.rglob("*.yaml"))


@pytest.mark.parametrize("preset", options("experiment"))
def test_a_preset_comments_each_value_in_one_line_and_links_its_page(preset):
    lines = (CONF_DIR / "experiment" / f"{preset}.yaml").read_text().splitlines()
    header = list(itertools.takewhile(lambda line: line.startswith("#"), lines))
    assert 2 <= len(header) <= 4, "a preset opens with at most three lines on what it runs"
    assert re.search(r"docs/(experiments/\w+|presets)\.md", "\n".join(header)), "the header links its page"
    comment_runs = [len(list(run)) for is_comment, run in
                    itertools.groupby(lines[len(header):], key=lambda line: line.lstrip().startswith("#"))
                    if is_comment]
    assert max(comment_runs, default=0) <= 1, "one comment line per value (the why goes in the linked page)"


@pytest.mark.parametrize("path", conf_files(), ids=lambda p: str(p.relative_to(CONF_DIR)))
def test_conf_comments_use_no_undefined_terms(path):
    found = UNDEFINED.findall(path.read_text())
    assert not found, f"{path.relative_to(PROJECT_ROOT)}: {found}"


def test_every_docs_page_a_comment_or_help_text_names_exists():
    named = {link for path in conf_files() for link in DOCS_LINK.findall(path.read_text())}
    named |= {link for schema in every_registered_schema() for field in dataclasses.fields(schema)
              for link in DOCS_LINK.findall(field.metadata.get(HELP, ""))}
    assert named, "no links found: the pattern is wrong"
    assert sorted(link for link in named if not (PROJECT_ROOT / link).is_file()) == []
