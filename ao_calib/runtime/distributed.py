"""One run over several processes (torchrun, ``accelerate launch``, a multi-task SLURM job).

The processes are the ones TRL's trainers already train with (accelerate's ``PartialState``); this module adds
what a whole run needs around training: one start time (so every rank names the same run directory), the main
process deciding and the others following (``on_main``), and work split by rank and gathered back in the original
order (``split``/``gather_split``). With one process every helper is a plain call, and nothing initialises a
process group.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import pickle
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from omegaconf import OmegaConf

from ao_calib.core.errors import RemoteError

T = TypeVar("T")


def export_submitit_environment() -> None:
    """A submitit job with several tasks (``hydra.launcher.tasks_per_node`` > 1, or several nodes, under
    ``hydra/launcher=slurm`` or ``submitit_local``) starts one process per task but sets none of the variables
    torch.distributed reads; submitit's ``TorchDistributedEnvironment`` derives them (RANK, LOCAL_RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT) from the job's. Nothing to do under torchrun/accelerate (RANK is set), outside
    submitit, or in a one-task job. (torchrun is not started inside a submitit job: the tasks are the processes.)"""
    if "RANK" in os.environ or not os.environ.get("SUBMITIT_EXECUTOR"):
        return
    from submitit import JobEnvironment
    from submitit.helpers import TorchDistributedEnvironment

    if JobEnvironment().num_tasks > 1:
        # Each process picks its GPU by LOCAL_RANK (accelerate's device), so CUDA_VISIBLE_DEVICES stays whole.
        TorchDistributedEnvironment().export(set_cuda_visible_devices=False)


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE") or 1)


def rank() -> int:
    return int(os.environ.get("RANK") or 0)


def local_rank() -> int:
    """The process's index on its machine: its GPU."""
    return int(os.environ.get("LOCAL_RANK") or 0)


def is_main() -> bool:
    return rank() == 0


def is_distributed() -> bool:
    return world_size() > 1


def _ready() -> None:
    """The process group, through accelerate (as the trainers will find it later): gloo on CPU, NCCL on GPUs."""
    from accelerate import PartialState

    PartialState()


def broadcast(value: T) -> T:
    """The main process's ``value`` on every process (any picklable object)."""
    if not is_distributed():
        return value
    import torch.distributed as dist

    _ready()
    box = [value if is_main() else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def all_gather(value: T) -> list[T]:
    """Every process's ``value``, in rank order, on every process."""
    if not is_distributed():
        return [value]
    import torch.distributed as dist

    _ready()
    out: list[Any] = [None] * world_size()
    dist.all_gather_object(out, value)
    return out


def shutdown() -> None:
    """Ends this process's part in the process group at the end of a run (local, not a collective): a group left
    for the interpreter's exit to tear down can abort the process there."""
    dist = sys.modules.get("torch.distributed")  # not imported: no group (and no torch import for an early error)
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def on_main(fn: Callable[[], T]) -> T:
    """``fn()`` on the main process only, its result (or its error) on every process: for what must happen once
    (judge calls, file writes) while the others wait for the outcome.

    An error is handed on as its type's name, its text and its traceback's text, never as the object (an exception
    holding a lambda does not pickle, and trying would end rank 0 with a pickling error and the others with a
    closed connection, the error's own text lost everywhere): the main process re-raises its own exception, every
    other process an ``errors.RemoteError`` whose message carries the type and text (an ``AOCalibError``: the run
    ends there with one line, the main process reporting the error itself). A result that does not pickle is
    such an error too, raised on every process alike."""
    if not is_distributed():
        return fn()
    error: BaseException | None = None
    payload = b""
    if is_main():
        try:
            payload = pickle.dumps(("ok", fn()))
        except BaseException as exc:  # noqa: BLE001 -- described to every rank, re-raised below
            error = exc
            payload = pickle.dumps(("error", describe_error(exc)))
    kind, value = pickle.loads(broadcast(payload))
    if kind == "ok":
        return value
    if error is not None:
        raise error  # the main process: its own exception, its traceback and chain intact
    type_name, text, remote_traceback = value
    raise RemoteError(0, type_name, text, remote_traceback)


def describe_error(exc: BaseException) -> tuple[str, str, str]:
    """(type name, text, formatted traceback) of ``exc``: plain strings, which always pickle."""
    cls = type(exc)
    name = cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 -- a broken __str__ still leaves the type and the traceback
        text = "<the error's text could not be read>"
    try:
        formatted = "".join(traceback.format_exception(exc))
    except Exception:  # noqa: BLE001
        formatted = ""
    return name, text, formatted


def split(items: Sequence[T]) -> list[T]:
    """This process's share of ``items``: every ``world_size``-th item from its rank (shares differ by one item at
    most, and the same rows go to the same rank on every call)."""
    return list(items[rank()::world_size()])


def gather_split(shares: list[T], total: int) -> list[T]:
    """The inverse of ``split``: every process's share back into the original order, on every process."""
    if not is_distributed():
        return shares
    gathered = all_gather(shares)
    out: list[Any] = [None] * total
    for r, share in enumerate(gathered):
        out[r::world_size()] = share
    return out


def map_split(fn: Callable[[list[T]], list[Any]], items: Sequence[T], even: bool | None = None) -> list[Any]:
    """``fn`` over this process's share, the results of all shares in the order of ``items``, on every process.

    ``even`` (default: when the model is sharded, ``sharded()``): every share is padded to the same length by
    repeating its last item (or the first of ``items``), and the padding's results are dropped. A sharded model's
    forward pass is a collective: a rank with one row fewer would leave the others waiting in their last batch."""
    share = split(items)
    if even is None:
        even = is_distributed() and sharded()
    if not even or not is_distributed() or not items:
        return gather_split(fn(share), len(items))
    size = -(-len(items) // world_size())
    filler = share[-1] if share else items[0]
    results = fn(share + [filler] * (size - len(share)))
    return gather_split(list(results[: len(share)]), len(items))


def start_time() -> datetime.datetime:
    """When the run started, as the main process saw it: run directories named by time are the same on every rank
    (each rank's own clock would give each its own directory). One process: now, as Hydra's ``now`` gives it."""
    return _agreed_start_time() if is_distributed() else datetime.datetime.now()


@functools.cache
def _agreed_start_time() -> datetime.datetime:
    # Asked once per process (a collective): every rank resolves the run directory's name alike.
    return broadcast(datetime.datetime.now())


def _run_started(pattern: str) -> str:
    return start_time().strftime(pattern)


# ``${run_started:%H-%M-%S}`` in ``hydra.run.dir``: Hydra's own ``now`` is read separately by each process. (A sweep
# directory is decided once, by the launcher's process, so it keeps ``now``.)
OmegaConf.register_new_resolver("run_started", _run_started, replace=True)


def log_to_own_file(run_dir) -> None:
    """The other processes log to ``rank<N>.log`` in the run directory instead of into the main's log file, and
    show only warnings on the console (the main process speaks for the run)."""
    if is_main():
        return
    root = logging.getLogger()
    for handler in list(root.handlers):
        if isinstance(handler, logging.FileHandler):
            root.removeHandler(handler)
            handler.close()
            own = logging.FileHandler(os.path.join(str(run_dir), f"rank{rank()}.log"))
            own.setFormatter(handler.formatter)
            own.setLevel(handler.level)
            root.addHandler(own)
        elif isinstance(handler, logging.StreamHandler):
            handler.setLevel(max(handler.level, logging.WARNING))


def device():
    """This process's device as accelerate assigns it (``cuda:LOCAL_RANK`` on GPUs, the CPU otherwise)."""
    from accelerate import PartialState

    return PartialState().device


def sharded() -> bool:
    """Launched with one of the sharding configs (FSDP, DeepSpeed ZeRO): the model is placed by the trainer's
    accelerator, which shards it, rather than copied whole onto each device first."""
    from accelerate.utils import parse_flag_from_env  # accelerate's own reading of its variables

    return parse_flag_from_env("ACCELERATE_USE_FSDP") or parse_flag_from_env("ACCELERATE_USE_DEEPSPEED")
