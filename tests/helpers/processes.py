"""Work run in two real processes, as two ranks of a distributed run."""

from __future__ import annotations

from pathlib import Path

import pytest

# What the two processes' work imports: loaded once by the fork server that starts them, not by every process.
FORKSERVER_PRELOAD = ["torch", "torch.distributed", "torch.distributed.fsdp", "transformers", "peft", "safetensors",
                      "ao_calib.config", "ao_calib.models.loading", "ao_calib.runtime.sharding", "ao_calib.steering",
                      "ao_calib.steering.activations", "ao_calib.evaluation.generation", "tests.test_distributed"]


def spawn_two(work, out: Path, timeout: float | None = None) -> None:
    """``work(rank, port, out)`` in two real processes on a free local port (torch.multiprocessing), forked from
    multiprocessing's fork server: a fresh interpreter that has only imported the libraries, started once per
    test process. With a ``timeout`` (seconds) a run still going then is killed and fails the test: a hang does not
    hang CI."""
    import multiprocessing
    import socket
    import time

    import torch.multiprocessing as mp

    multiprocessing.get_context("forkserver").set_forkserver_preload(FORKSERVER_PRELOAD)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    context = mp.start_processes(work, args=(port, str(out)), nprocs=2, join=False, start_method="forkserver")
    deadline = None if timeout is None else time.monotonic() + timeout
    while not context.join(timeout=1.0):  # raises as soon as one process fails (the other is ended)
        if deadline is not None and time.monotonic() > deadline:
            for process in context.processes:
                if process.is_alive():
                    process.kill()
            for process in context.processes:
                process.join(5)
            pytest.fail(f"{work.__name__}: the two processes were still running after {timeout} s")
