"""Judge throughput: the litellm judge against a local OpenAI-compatible server with a fixed latency.

256 distinct items are judged at concurrency 64 against a server that takes 100 ms per request (so the floor is
4 waves x 100 ms = 0.4 s), through real litellm and real HTTP on 127.0.0.1. The server (ao_calib/judges/rule_server.py) runs
in its own process by default, as a real judge server would, so its CPU time is not charged to the judge's GIL. Then a fresh judge with the same cache
directory judges them again: it should make no HTTP call. Each round uses a new cache directory; the median round
is reported. A one-item warm-up (litellm's lazy set-up, the connection pool) runs first and is not timed. The same
rounds are then run against an instant server (0 ms latency), which measures the client's own cost per request.

All of it runs once per litellm model name: ``openai/...`` (litellm through the OpenAI SDK) and ``hosted_vllm/...``
(litellm's own HTTP path, the provider it documents for self-hosted OpenAI-compatible servers).

    python -m bench.judge_throughput [--items 256] [--concurrency 64] [--latency 0.1] [--rounds 3]
                                     [--models openai/judge-bench,hosted_vllm/judge-bench]
                                     [--server process|thread] [--write BENCHMARKS.md]

It does not import torch unless ``--write`` is given (bench.report imports it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

import httpx

from ao_calib.judges.base import JudgeItem
from ao_calib.judges.config import LiteLLMJudgeConfig
from ao_calib.judges.litellm_judge import LiteLLMJudge
from ao_calib.judges.rule_server import JudgeServer
from ao_calib_tasks.oracle.prompt import JUDGE_PROMPT

MODELS = ("openai/judge-bench", "hosted_vllm/judge-bench")
TARGET_S = 1.0  # the "256 judgments in about 1 s at concurrency 64"
ROOT = Path(__file__).resolve().parent.parent


class ThreadServer:
    """The test server on a thread of this process (shares the GIL with the judge)."""

    def __init__(self, latency: float):
        self.server = JudgeServer()
        self.server.behaviour.latency_s = latency

    def __enter__(self):
        self.server.start()
        self.api_base = self.server.api_base
        return self

    def __exit__(self, *exc):
        self.server.stop()

    def reset(self):
        self.server.reset_stats()

    def stats(self) -> dict:
        return {"total": self.server.stats.total, "max_in_flight": self.server.stats.max_in_flight}


class ProcessServer:
    """The test server in a process of its own, as a real judge server would be; counters over HTTP."""

    def __init__(self, latency: float):
        self.latency = latency

    def __enter__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "ao_calib.judges.rule_server", "--latency", str(self.latency),
                                      "--max-seconds", "900"], cwd=ROOT, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.proc.kill()
            raise SystemExit(f"the judge server did not start: {line!r}")
        self.api_base = f"http://127.0.0.1:{int(line.split()[1])}/v1"
        self.http = httpx.Client(base_url=self.api_base.removesuffix("/v1"), timeout=10)
        return self

    def __exit__(self, *exc):
        self.http.close()
        self.proc.stdin.close()  # the server exits at EOF on stdin
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def reset(self):
        self.http.post("/reset_stats").raise_for_status()

    def stats(self) -> dict:
        return self.http.get("/stats").json()


def device_string() -> str:
    return (f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores), Python "
            f"{platform.python_version()}, litellm {version('litellm')}, local aiohttp server")


def make_items(n: int, tag: str) -> list[JudgeItem]:
    return [JudgeItem(prompt=f"Text number {i}: the cat sat on mat {i}.", question=f"[{tag}] What sat on mat {i}?",
                      answer="yes" if i % 2 else f"a dog ({i})") for i in range(n)]


def one_round(server, args, model: str, round_no: int) -> dict:
    items = make_items(args.items, f"round {round_no}")
    with tempfile.TemporaryDirectory(prefix="judge_bench_") as cache_dir:
        def judge():
            return LiteLLMJudge(LiteLLMJudgeConfig(model=model, prompt=JUDGE_PROMPT, api_base=server.api_base,
                                                   max_concurrency=args.concurrency, timeout_s=30.0, max_retries=3,
                                                   backoff_s=0.5, cache_dir=cache_dir))

        first = judge()
        server.reset()
        start = time.perf_counter()
        scores = asyncio.run(first.score(items))
        cold_s = time.perf_counter() - start
        counts = server.stats()
        cold_calls, max_in_flight = counts["total"], counts["max_in_flight"]
        expected = [0.9 if i % 2 else 0.1 for i in range(args.items)]
        if scores != expected:
            raise SystemExit(f"wrong scores in round {round_no}: {sum(a != b for a, b in zip(scores, expected))} differ")
        stats = first.pop_step_stats()

        second = judge()  # a fresh judge (as a new process would be) on the same cache directory
        start = time.perf_counter()
        again = asyncio.run(second.score(items))
        warm_s = time.perf_counter() - start
        if again != expected:
            raise SystemExit(f"cached scores differ in round {round_no}")
        return {"cold_s": cold_s, "cold_calls": cold_calls, "max_in_flight": max_in_flight, "warm_s": warm_s,
                "warm_calls": server.stats()["total"] - cold_calls, "cache_hits": second.stats.cache_hits,
                "latency_mean_s": stats["judge/latency_mean_s"], "latency_p95_s": stats["judge/latency_p95_s"],
                "failures": stats["judge/failures"]}


def measure(model: str, args, server_cls) -> dict:
    """The median round at ``args.latency`` and at 0 ms for one litellm model name."""
    with server_cls(args.latency) as server:
        warm = LiteLLMJudge(LiteLLMJudgeConfig(model=model, prompt=JUDGE_PROMPT, api_base=server.api_base,
                                               max_retries=0))
        asyncio.run(warm.score(make_items(1, "warm-up")))
        rounds = [one_round(server, args, model, r) for r in range(args.rounds)]
    with server_cls(0.0) as server:  # the same work with an instant server: the client's own cost
        rounds0 = [one_round(server, args, model, 100 + r) for r in range(args.rounds)]
    rounds.sort(key=lambda r: r["cold_s"])
    rounds0.sort(key=lambda r: r["cold_s"])
    med = dict(rounds[len(rounds) // 2])
    med["all_cold_s"] = [r["cold_s"] for r in rounds]
    med["client_s"] = rounds0[len(rounds0) // 2]["cold_s"]
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=256)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.1, help="server latency per request, seconds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated litellm model names")
    parser.add_argument("--server", choices=["process", "thread"], default="process",
                        help="run the test server in its own process (default) or on a thread of this one")
    parser.add_argument("--write", type=Path, default=None, help="update this BENCHMARKS.md")
    args = parser.parse_args()

    server_cls = ProcessServer if args.server == "process" else ThreadServer
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    results = {model: measure(model, args, server_cls) for model in models}

    floor = -(-args.items // args.concurrency) * args.latency
    setting = (f"{args.items} distinct items, concurrency {args.concurrency}, {args.latency * 1000:.0f} ms server "
               f"latency (floor {floor:.1f} s), server in its own {args.server}, median of {args.rounds} rounds")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    for model, med in results.items():
        cold_all = ", ".join(f"{t:.2f}" for t in med["all_cold_s"])
        print(f"judge_throughput {model}: {args.items} items @ concurrency {args.concurrency}, "
              f"{args.latency * 1000:.0f} ms latency: {med['cold_s']:.2f} s ({args.items / med['cold_s']:.0f} items/s; "
              f"rounds {cold_all} s), {med['cold_calls']} HTTP calls, max {med['max_in_flight']} in flight, call "
              f"latency mean {med['latency_mean_s'] * 1000:.0f} ms p95 {med['latency_p95_s'] * 1000:.0f} ms, "
              f"{med['failures']:.0f} failures | cached rerun (fresh judge): {med['warm_calls']} HTTP calls, "
              f"{med['warm_s']:.3f} s | same items at 0 ms server latency: {med['client_s']:.2f} s "
              f"({med['client_s'] / args.items * 1000:.1f} ms of client time per request)")
    print(f"load avg {load:.2f}")

    if args.write is not None:
        from bench.report import update_benchmarks  # imports torch (for its own device_name); only here

        device = device_string()
        table = ["| benchmark | setting | ao_calib | target | device |", "|---|---|---|---|---|"]
        for model, med in results.items():
            table += [
                f"| litellm judge `{model}`, cold cache | {setting} | {med['cold_s']:.2f} s, "
                f"{med['cold_s'] / TARGET_S:.2f}x the target ({args.items / med['cold_s']:.0f} items/s, "
                f"{med['cold_calls']} HTTP calls, max {med['max_in_flight']} in flight) | about {TARGET_S:.0f} s | "
                f"{device} |",
                f"| litellm judge `{model}`, cached rerun | same items, fresh judge on the same cache directory | "
                f"{med['warm_calls']} HTTP calls, {med['warm_s']:.3f} s | 0 HTTP calls | {device} |",
                f"| litellm judge `{model}`, instant server | as the cold-cache row, 0 ms server latency: the client's "
                f"own cost | {med['client_s']:.2f} s ({med['client_s'] / args.items * 1000:.1f} ms per request) | - | "
                f"{device} |",
            ]
        table += [
            "",
            "The judge is bound by client CPU here, not by concurrency: litellm spends a few ms of CPU per request "
            "(the instant-server rows), which on this machine is more than the 0.4 s that 100 ms of latency at "
            "concurrency 64 would cost on its own. `hosted_vllm/` skips the OpenAI SDK and costs less per request.",
        ]
        command = "python -m bench.judge_throughput " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        update_benchmarks(args.write, "judge_throughput", table, command=command.strip())
        print(f"wrote the judge_throughput section of {args.write}")


if __name__ == "__main__":
    main()
