"""The Python sandbox's cost per call (``ao_calib.tools.sandbox.run_python``: a fresh ``python -I -S`` child with its
limits, audit hook, temporary directory and output files) against the plainest way to run the same program in
another process (``subprocess.run([python, "-c", code])``, no limits, no isolation), and the calculator's bounded
evaluator in process for scale; alternating rounds in one process (``bench.report.alternating_rounds``).

    python -m bench.tool_sandbox [--rounds 5] [--calls 20] [--write BENCHMARKS.md]
"""

from __future__ import annotations

import subprocess
import sys
import time

from ao_calib.tools.sandbox import run_python
from bench.report import alternating_rounds, arguments, publish
from tasks.tool_json.tools import calculator

CODE = "print(sum(x * x for x in range(1000)))"  # a typical tool row's program: a few ms of work, one line printed


def per_call(call, calls: int):
    def run() -> float:
        start = time.perf_counter()
        for _ in range(calls):
            call()
        return (time.perf_counter() - start) / calls

    return run


def main() -> None:
    args = arguments(__doc__, 5, calls=(20, "calls per round")).parse_args()
    assert run_python(CODE).output == "332833500\n"
    sides = {
        "sandbox (run_python)": per_call(lambda: run_python(CODE), args.calls),
        "plain subprocess": per_call(lambda: subprocess.run([sys.executable, "-c", CODE], capture_output=True,
                                                            check=True), args.calls),
        "calculator (in process)": per_call(lambda: calculator("8 * 11.30 + 5 * 37.65"), args.calls),
    }
    medians = alternating_rounds(sides, args.rounds, unit="ms", scale=1000)
    base = medians["plain subprocess"]
    table = ["| a tool call | ms per call | ratio to a plain subprocess |", "|---|---|---|"]
    table += [f"| {name} | {1000 * seconds:.2f} | {seconds / base:.3f} |" for name, seconds in medians.items()]
    publish(table, "tool sandbox", f"python -m bench.tool_sandbox --rounds {args.rounds} --calls {args.calls}",
            args.write)


if __name__ == "__main__":
    main()
