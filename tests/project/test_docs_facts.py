"""Facts the README and the docs site state stay true: README's results come from the results page, its run
directory names the files the code writes, it stays short and states no figure of the test suite, and the site's
navigation lists every page."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from ao_calib.runs.run_dir import RunDir
from tests.helpers.paths import PROJECT_ROOT

README = PROJECT_ROOT / "README.md"
DOCS = PROJECT_ROOT / "docs"
RESULTS = DOCS / "results.md"
# Pages other parts of the project write (the generated settings reference, the results and experiment pages).
WRITTEN_ELSEWHERE = ("reference/", "experiments/", "results.md")


def section(text: str, heading: str) -> str:
    """The body of the ``## heading`` section of a markdown page."""
    return text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]


def table_rows(text: str) -> list[str]:
    """The body rows of the first markdown table in ``text`` (no header, no separator)."""
    rows = [line.strip() for line in text.splitlines() if line.startswith("|")]
    return [row for row in rows[2:]]


def as_on_the_results_page(row: str) -> str:
    """A README row with its links written as the results page writes them (README links into docs/)."""
    return row.replace("](docs/results.md#", "](#").replace("](docs/", "](")


def without_code(text: str) -> str:
    return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def test_readmes_results_table_is_the_results_pages_at_a_glance_table():
    readme_rows = table_rows(section(README.read_text(), "Results at a glance"))
    page_rows = table_rows(section(RESULTS.read_text(), "At a glance"))
    assert readme_rows, "README.md has no results table"
    numbered = [row for row in readme_rows if re.search(r"\d\.\d", row)]
    assert numbered == readme_rows or len(numbered) >= 3
    missing = [row for row in numbered if as_on_the_results_page(row) not in page_rows]
    assert missing == [], f"README rows not on docs/results.md (copy its \"At a glance\" table again): {missing}"


def test_the_figures_readme_quotes_are_on_the_results_page():
    """The three jobs' "what it reaches" figures and the quickstart's nine-seed figures are the results page's."""
    readme = README.read_text()
    results = RESULTS.read_text()
    quoted = re.findall(r"\b0\.\d{3}\b", section(readme, "What it is"))
    quoted += re.findall(r"AUROC (0\.\d{3}) with ECE\s+(0\.\d{3})", section(readme, "Quickstart"))[0]
    assert len(quoted) >= 8
    assert [f for f in quoted if f not in results] == []


def test_readme_states_no_figure_of_the_test_suite():
    text = README.read_text()
    assert not re.search(r"\d[\d,]* tests\b", text)
    assert not re.search(r"passed in \d|tests? (took|ran in|run in) \d|\d+ s on an idle", text)
    assert "minutes, depending on the machine" not in text


def test_readme_is_short_and_has_a_table_of_contents():
    text = README.read_text()
    assert len(text.splitlines()) <= 350
    assert len(text.split()) <= 4000
    contents = text.split("**Contents:**", 1)[1].split("\n\n", 1)[0]
    anchors = re.findall(r"\]\(#([\w-]+)\)", contents)
    headings = {re.sub(r"[^\w\- ]", "", h).strip().lower().replace(" ", "-")
                for h in re.findall(r"^## (.+)$", text, re.M)}
    assert set(anchors) <= headings, set(anchors) - headings
    for entry in ("install", "quickstart", "the-gpu-recipe", "configure-and-sweep", "the-run-directory",
                  "results-at-a-glance"):
        assert entry in anchors, entry


def test_no_paragraph_of_the_readme_or_the_docs_runs_over_120_words():
    """Prose paragraphs (blocks between blank lines, code blocks and tables left out)."""
    long = []
    for page in [README, *pages_written_here()]:
        for block in re.split(r"\n\s*\n", without_code(page.read_text())):
            if block.lstrip().startswith("|"):
                continue
            if len(block.split()) > 120:
                long.append(f"{page.relative_to(PROJECT_ROOT)}: {block[:80]}...")
    assert long == []


def test_readmes_run_directory_names_the_files_the_code_writes():
    tree = section(README.read_text(), "The run directory").split("```text", 1)[1].split("```", 1)[0]
    names = re.findall(r"[├└]── (\S+)", tree)
    run = RunDir("r")
    written = {RunDir.HYDRA_CONFIG.split("/")[0] + "/", RunDir.CONFIG, RunDir.METRICS, RunDir.COMPLETIONS,
               RunDir.ALERTS, RunDir.SUMMARY, RunDir.ADAPTER + "/", run.eval_report().name, run.predictions().name,
               run.reliability_plot().name, run.risk_coverage_plot().name,
               str(run.curves_plot().relative_to(run.path)),
               f"{RunDir.CHECKPOINTS}/{RunDir.CHECKPOINT_PREFIX}N/",
               str(run.checkpoints("warmup").relative_to(run.path)) + "/", "run.log"}
    assert len(names) >= 12
    assert set(names) <= written, set(names) - written


def pages_written_here() -> list[Path]:
    return [p for p in sorted(DOCS.rglob("*.md")) if not p.relative_to(DOCS).as_posix().startswith(WRITTEN_ELSEWHERE)]


def test_readme_and_docs_use_no_private_shorthand():
    """Words a reader of this repository cannot look up."""
    banned = re.compile(r"the design notes?|prereg|the issue\b|\bbed\b|\bQC\d|\b(first|second|third|fourth|fifth|"
                        r"sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|"
                        r"sixteenth|seventeenth|eighteenth|nineteenth) round\b", re.I)
    found = [f"{page.relative_to(PROJECT_ROOT)}: {m.group(0)}" for page in [README, *pages_written_here()]
             for m in banned.finditer(page.read_text())]
    assert found == []


def test_no_docs_page_written_here_runs_over_400_lines():
    assert [p.name for p in pages_written_here() if len(p.read_text().splitlines()) > 400] == []


def nav_pages(node) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [page for item in node for page in nav_pages(item)]
    if isinstance(node, dict):
        return [page for value in node.values() for page in nav_pages(value)]
    return []


def test_the_sites_navigation_lists_every_docs_page_and_nothing_else():
    config = yaml.safe_load((PROJECT_ROOT / "mkdocs.yml").read_text())
    listed = nav_pages(config["nav"])
    pages = sorted(p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md"))
    assert sorted(listed) == pages
    assert {"results.md", "reference/settings.md", "presets.md"} <= set(listed)
    assert listed[:2] == ["index.md", "getting-started.md"]  # a newcomer's first two pages


def closing_table_block(text: str) -> str:
    """The fenced ``text`` block that holds a closing table (its header row starts with ``evaluation``)."""
    blocks = re.findall(r"^```text\n(.*?)^```", text, re.S | re.M)
    return next(block for block in blocks if re.search(r"^ evaluation\s+acc", block, re.M))


def test_getting_started_quotes_the_readmes_quickstart_table_and_its_machine():
    readme = section(README.read_text(), "Quickstart")
    page = (DOCS / "getting-started.md").read_text()
    assert closing_table_block(page) == closing_table_block(readme)
    page, readme = " ".join(page.split()), " ".join(readme.split())  # the same words, wrapped anyhow
    machine = r"On the default seed, on .+?, it printed:"  # the machine the table was printed on
    assert re.search(machine, page).group(0) == re.search(machine, readme).group(0)
    smoke = r"python -m ao_calib\.run experiment=quickstart warmup\.max_steps=[^`]*"
    assert re.search(smoke, page).group(0).strip() == re.search(smoke, readme).group(0).strip()


IMAGE = re.compile(r"!\[.*?\]\(([^)\s]+)\)")


def test_every_figure_on_the_site_exists_and_says_the_command_that_made_it():
    """Each image a page shows is a file under docs/, with a command (``python ...``) in the paragraph before or
    after it; every file under docs/img/ is shown somewhere, and each script there is named on the page that shows
    what it draws."""
    shown: set[Path] = set()
    for page in sorted(DOCS.rglob("*.md")):
        blocks = re.split(r"\n\s*\n", page.read_text())
        for i, block in enumerate(blocks):
            for target in IMAGE.findall(block):
                path = (page.parent / target).resolve()
                assert path.is_file(), f"{page.relative_to(DOCS)} shows {target}, which is not there"
                shown.add(path)
                around = " ".join(blocks[max(i - 1, 0): i + 2])
                assert re.search(r"`[^`]*python[^`]*`", around), (
                    f"{page.relative_to(DOCS)}: no command beside the figure {target}")
    img = DOCS / "img"
    figures = {p.resolve() for p in img.iterdir() if p.suffix != ".py"}
    assert figures - shown == set(), f"figures no page shows: {sorted(p.name for p in figures - shown)}"
    text = "\n".join(p.read_text() for p in DOCS.rglob("*.md"))
    for script in img.glob("*.py"):
        assert f"python docs/img/{script.name}" in text, f"no page says how to run docs/img/{script.name}"
