"""Shared helpers for benchmark scripts: the device in words, and BENCHMARKS.md sections by marker."""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path

import torch


def device_name() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores, torch threads {torch.get_num_threads()})"


def update_benchmarks(path: Path, section: str, table: list[str], command: str) -> None:
    """Replaces (or appends) the block between ``<!-- bench:section -->`` markers, leaving the rest as it is."""
    begin, end = f"<!-- bench:{section} -->", f"<!-- /bench:{section} -->"
    block = "\n".join([begin, f"Measured {time.strftime('%Y-%m-%d')} with `{command}`.", "", *table, end])
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    text = pattern.sub(lambda _: block, text) if pattern.search(text) else text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text)


def alternating_rounds(timed: dict, rounds: int, unit: str = "s", scale: float = 1.0) -> dict[str, float]:
    """Median of what each side's callable returns (its seconds), over ``rounds`` counted rounds, with the order
    alternating between rounds so drift in machine load hits every side alike. Round 0 warms up every side
    (allocator, kernels, caches) and is not counted. Each round is printed as ``scale`` x seconds in ``unit``."""
    import statistics

    times: dict[str, list[float]] = {name: [] for name in timed}
    names = list(timed)
    for r in range(rounds + 1):
        for name in names if r % 2 == 0 else names[::-1]:
            elapsed = timed[name]()
            if r:
                times[name].append(elapsed)
            print(f"round {r} {name:9s} {elapsed * scale:8.1f} {unit}", flush=True)
    return {name: statistics.median(t) for name, t in times.items()}


def alternating_medians(builders: dict, rounds: int, steps: int) -> dict[str, float]:
    """Median seconds per optimiser step of each trainer, trained ``steps`` steps per round from a fresh build
    (``alternating_rounds``; the build is not timed)."""
    import tempfile

    def timed_training(build):
        def run() -> float:
            with tempfile.TemporaryDirectory() as tmp:
                trainer = build(Path(tmp))
                start = time.perf_counter()
                trainer.train()
                return (time.perf_counter() - start) / steps
        return run

    return alternating_rounds({name: timed_training(build) for name, build in builders.items()}, rounds,
                              unit="ms/step", scale=1000.0)


def publish(table: list[str], section: str, command: str, path: Path | None) -> None:
    """Prints the machine and the table; with ``path``, writes the table into that BENCHMARKS.md under ``section``."""
    print(device_name(), *table, sep="\n")
    if path:
        update_benchmarks(path, section, table, command)


def arguments(doc: str, rounds: int, **counts: tuple[int, str]):
    """A bench's command line: ``--rounds`` (counted rounds per side; one more warms up), each of ``counts`` as
    ``--name N`` (default, help), and ``--write BENCHMARKS.md``; parsed."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds, help="counted rounds per side (one more warms up)")
    for name, (default, what) in counts.items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, help=what)
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    return parser
