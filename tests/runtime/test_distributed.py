"""Runs over two processes on CPU (torchrun, gloo), against one process with the same global batch: one run
directory, one summary and closing screen, the same metric rows, the same held-out predictions before training
(evaluation split over the ranks and gathered back in order) and held-out numbers within a stated tolerance after
it; the oracle's placeholder check runs in every pass of both processes; a failing rank fails the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ao_calib.core.errors import RemoteError
from ao_calib.runs.run_dir import RunDir
from ao_calib.runtime import distributed
from tests.helpers.commands import run_cli
from tests.helpers.files import read_jsonl
from tests.helpers.paths import PROJECT_ROOT
from tests.helpers.processes import spawn_two

# After a few steps the two runs' held-out numbers may differ only by what different sampled completions (each
# rank draws its own) do to a few updates: on these tiny runs, at most this much on a [0, 1] metric.
TOLERANCE = 0.15

FUNCTION_CALL = ["experiment=function_call_tiny", "trainer.max_steps=2", "eval.num_samples=8"]
# GRPO over two processes is compared on the oracle: the trainer class function calling uses, steered, after a
# warm-up stage (function-calling GRPO starts over two processes in the failing-rank test below).
# Two warm-up steps (one logged row) and short answers: what the comparisons need, kept small; eight held-out rows,
# so that one answer that differs moves a rate by less than TOLERANCE.
CASES = {
    "tool_json_sft_ppo": ["experiment=tool_json_sft_ppo_tiny", "warmup.max_steps=2", "trainer.max_steps=2",
                          "trainer.max_completion_length=16", "eval.max_new_tokens=16", "eval.every_steps=null"],
    # Windows of 1-6 positions: a row paired with another row's vectors would put them off the placeholders.
    "oracle_grpo": ["experiment=oracle_tiny", "warmup.max_steps=2", "task.data.generate.n_train_prompts=8",
                    "task.activations.positions=window", "task.activations.window_min=1",
                    "task.activations.window_max=6"],
}


def launch(out: Path, processes: int, overrides: list[str], env: dict | None = None
           ) -> tuple[subprocess.CompletedProcess, list[Path]]:
    """``python -m ao_calib.run`` (one process: forked where it can be, as run_cli does) or ``torchrun
    --nproc_per_node N -m ao_calib.run``; returns the result and the run directories made under ``out``."""
    variables = {"OMP_NUM_THREADS": "1", **(env or {})}
    if processes == 1:
        result = run_cli("ao_calib.run", *overrides, f"paths.output_dir={out}", timeout=900, env=variables)
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={processes}",
               "-m", "ao_calib.run", *overrides, f"paths.output_dir={out}"]
        result = subprocess.run(cmd, check=False, cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900,
                                env={**os.environ, **variables})
    return result, sorted(p for p in (out / "runs").glob("*/*/*") if p.is_dir())


def headline(run: Path, tag: str) -> dict[str, float]:
    metrics = json.loads(RunDir(run).eval_report(tag).read_text())["metrics"]
    return {k: v for k, v in metrics.items() if isinstance(v, float) and v == v and 0.0 <= v <= 1.0}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_two_processes_make_one_run_with_one_process_numbers(tmp_path, case):
    one, (single,) = launch(tmp_path / "one", 1, CASES[case])
    assert one.returncode == 0, one.stderr[-3000:]
    two, runs = launch(tmp_path / "two", 2, CASES[case])
    assert two.returncode == 0, two.stderr[-3000:]
    assert len(runs) == 1, runs  # every rank used the main process's directory
    (run,) = runs
    assert two.stdout.count("run completed") == 1 and two.stderr.count("run completed") == 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["final_metrics"]["step"] == \
        json.loads((single / "summary.json").read_text())["final_metrics"]["step"]
    assert not list(run.glob("failed_rank*.json"))
    # One metrics row per logged step and stage, as in one process (the other rank writes none).
    ours, theirs = read_jsonl(run / "metrics.jsonl"), read_jsonl(single / "metrics.jsonl")
    assert [(r["stage"], r["step"]) for r in ours] == [(r["stage"], r["step"]) for r in theirs]
    # Before training both see the same model: the split-and-gathered evaluation gives one process's predictions,
    # row for row.
    initial = [r["completion"] for r in read_jsonl(RunDir(run).predictions("initial"))]
    assert initial == [r["completion"] for r in read_jsonl(RunDir(single).predictions("initial"))]
    assert len(initial) == json.loads(RunDir(run).eval_report("initial").read_text())["num_samples"]
    for tag in ("initial", "final"):
        got, want = headline(run, tag), headline(single, tag)
        assert got.keys() == want.keys() and got
        far = {k: (got[k], want[k]) for k in got if abs(got[k] - want[k]) > (1e-6 if tag == "initial" else TOLERANCE)}
        assert not far, f"{tag}: {far}"
    assert (run / "adapter" / "adapter_config.json").is_file() and (run / "rank1.log").is_file()
    if case == "oracle_grpo":
        for log in (run / "run.log", run / "rank1.log"):
            checked = re.findall(r"steering: (\d+) rows checked", log.read_text())
            assert checked and int(checked[-1]) > 0, log


@pytest.mark.slow
def test_a_failing_rank_fails_the_run_with_its_error(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "rank_rewards.py").write_text(textwrap.dedent('''
        import os

        def fails_on_rank_one(completions, **kwargs):
            if os.environ.get("RANK") == "1":
                raise RuntimeError("rank one cannot score")
            return [0.0] * len(completions)
    '''))
    result, (run,) = launch(tmp_path / "out", 2, [
        *FUNCTION_CALL, "eval.initial=false",
        "+reward.components.fragile={_target_:rank_rewards.fails_on_rank_one,weight:0.5}"],
        env={"PYTHONPATH": str(package)})
    assert result.returncode != 0
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "failed", summary
    assert "rank 1" in summary["error"] and "rank one cannot score" in summary["error"]


def _ranks_work(rank: int, port: int, out: str) -> None:
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    items = [f"row{i}" for i in range(7)]
    share = distributed.split(items)
    gathered = distributed.map_split(lambda rows: [r.upper() for r in rows], items)
    decided = distributed.on_main(lambda: f"rank {distributed.rank()} decided")
    try:
        distributed.on_main(lambda: 1 / 0)
        error = None
    except (ZeroDivisionError, RemoteError) as exc:  # rank 0: its own error; the others: its type and text
        error = str(exc) if isinstance(exc, RemoteError) else type(exc).__name__
    Path(out, f"{rank}.json").write_text(json.dumps({"share": share, "gathered": gathered, "decided": decided,
                                                     "error": error}))
    import torch.distributed as dist

    dist.destroy_process_group()  # before exit: a live gloo group can abort the process as it is torn down


def test_split_gather_and_main_decisions_over_two_real_processes(tmp_path):
    spawn_two(_ranks_work, tmp_path)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    assert results[0]["share"] == ["row0", "row2", "row4", "row6"] and results[1]["share"] == ["row1", "row3", "row5"]
    for r in results:  # every process gets all results in the original order, the main's decision, its error
        assert r["gathered"] == [f"ROW{i}" for i in range(7)]
        assert r["decided"] == "rank 0 decided"
    assert results[0]["error"] == "ZeroDivisionError"
    assert results[1]["error"] == "ZeroDivisionError: division by zero (raised on rank 0)"
    # One process: plain calls, no process group.
    assert distributed.split([1, 2, 3]) == [1, 2, 3] and distributed.on_main(lambda: "x") == "x"


def _uneven_sharded_evaluation(rank: int, port: int, out: str) -> None:
    """Seven rows over two ranks, each row's "forward pass" a collective (as a sharded model's is): with every share
    padded to the same length every rank takes as many passes and the evaluation ends; unpadded, rank 1 would stop
    one pass early and rank 0 would wait in its last pass forever."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), ACCELERATE_USE_FSDP="true")
    import torch
    import torch.distributed as dist

    assert distributed.sharded()
    assert distributed.all_gather(rank) == [0, 1]  # the process group is up, as in a run
    passes = []

    def forward(rows):
        out = []
        for row in rows:
            token = torch.tensor([float(len(row))])
            dist.all_reduce(token)  # every rank must take part in every pass
            passes.append(row)
            out.append(row.upper())
        return out

    items = [f"row{i}" for i in range(7)]
    gathered = distributed.map_split(forward, items)  # even by default when sharded
    Path(out, f"{rank}.json").write_text(json.dumps({"gathered": gathered, "passes": passes}))
    dist.destroy_process_group()


def test_an_uneven_evaluation_of_a_sharded_model_finishes_on_every_rank(tmp_path):
    spawn_two(_uneven_sharded_evaluation, tmp_path, timeout=120)  # a hang fails the test instead of hanging CI
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    for r in results:
        assert r["gathered"] == [f"ROW{i}" for i in range(7)]  # the padding's results are dropped
    assert results[0]["passes"] == ["row0", "row2", "row4", "row6"]
    assert results[1]["passes"] == ["row1", "row3", "row5", "row5"]  # padded with its own last row


def _unpicklable_errors(rank: int, port: int, out: str) -> None:
    """Rank 0's ``fn`` raises an exception holding a lambda (which does not pickle), then returns a lambda: every
    rank records what it caught."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))

    class HoldsALambda(Exception):
        def __init__(self, text):
            super().__init__(text)
            self.callback = lambda: text

    def judge_call():
        raise HoldsALambda("the judge answered 503 three times")

    caught = {}
    for name, fn in (("error", judge_call), ("result", lambda: (lambda: "not sendable"))):
        try:
            distributed.on_main(fn)
            caught[name] = None
        except BaseException as exc:  # noqa: BLE001 -- recorded for the test
            caught[name] = {"type": type(exc).__name__, "text": str(exc),
                            "remote_traceback": getattr(exc, "remote_traceback", ""),
                            "notes": getattr(exc, "__notes__", [])}
    Path(out, f"{rank}.json").write_text(json.dumps(caught))
    import torch.distributed as dist

    dist.destroy_process_group()


def test_an_unpicklable_error_on_the_main_process_ends_every_rank_with_its_text(tmp_path):
    spawn_two(_unpicklable_errors, tmp_path, timeout=120)  # a hang fails the test instead of hanging CI
    main, other = (json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2))
    text = "the judge answered 503 three times"
    # The main process re-raises its own exception; the other an error naming its type and text, with its
    # traceback (the frame that raised it) as a note.
    assert main["error"]["type"] == "HoldsALambda" and main["error"]["text"] == text
    assert other["error"]["type"] == "RemoteError"
    assert "HoldsALambda" in other["error"]["text"] and text in other["error"]["text"]
    assert "rank 0" in other["error"]["text"]
    assert "judge_call" in other["error"]["remote_traceback"] and text in other["error"]["remote_traceback"]
    assert any("judge_call" in note for note in other["error"]["notes"])
    # A result that does not pickle: the same error (the pickling error's type and text) on every rank.
    assert main["result"] is not None and other["result"]["type"] == "RemoteError"
    assert main["result"]["text"] in other["result"]["text"] and main["result"]["type"] in other["result"]["text"]
    assert "pickle" in main["result"]["text"].lower()


def _fsdp2_step(rank: int, port: int, out: str) -> None:
    """One steered training step of the tiny model, unsharded and then sharded by FSDP2 over two processes."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port))
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models
    from ao_calib.steering import steer
    from ao_calib.steering.layout import get_decoder_layers

    dist.init_process_group("gloo", rank=rank, world_size=2)
    cfg = compose_run_config(["experiment=function_call_tiny"])
    torch.manual_seed(0)  # the same LoRA initialisation on both processes
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 4000, (2, 12), generator=generator)
    vectors = [torch.randn(3, model.config.hidden_size, generator=generator) for _ in range(2)]
    positions = [[2, 3, 4], [5, 6, 7]]

    def step():
        with steer(model, vectors, positions, layer=1):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return loss.item()

    whole_loss = step()
    whole = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    for layer in get_decoder_layers(model):
        fully_shard(layer)
    fully_shard(model)
    sharded_loss = step()
    grads = {n: (p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad)
             for n, p in model.named_parameters() if p.grad is not None}
    local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in model.parameters())
    Path(out, f"{rank}.json").write_text(json.dumps({
        "losses": [whole_loss, sharded_loss], "same_grads": sorted(grads) == sorted(whole) and all(
            torch.allclose(grads[n], whole[n], rtol=1e-4, atol=1e-6) for n in whole),
        "grads": len(whole), "local": local, "full": sum(p.numel() for p in model.parameters())}))
    dist.destroy_process_group()


def test_fsdp2_shards_the_tiny_model_and_a_steered_step_matches_one_process(tmp_path):
    """accelerate turns FSDP on for GPUs only (on CPU its processes are plain MULTI_CPU), so this applies torch's
    FSDP2 (``fully_shard``, what conf/accelerate/fsdp2.yaml selects) directly, on gloo: each process holds half of
    the parameters, and a steered forward/backward gives the unsharded loss and LoRA gradients."""
    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models

    cfg = compose_run_config(["experiment=function_call_tiny"])
    models.model_source(cfg.model, cfg.paths.cache_dir)  # built once, before both processes load it
    spawn_two(_fsdp2_step, tmp_path)
    for rank in range(2):
        result = json.loads((tmp_path / f"{rank}.json").read_text())
        whole_loss, sharded_loss = result["losses"]
        assert abs(whole_loss - sharded_loss) < 1e-5 and result["grads"] > 0 and result["same_grads"]
        assert result["local"] * 2 == result["full"]  # every parameter split in two


SHARDED_PROMPTS = ["How do I bake bread?", "Write a poem about the sea.", "What is two plus two?",
                   "Name a large city in France, please.", "Why is the sky blue?"]  # 3 + 2 over two ranks


def _extraction_and_generation(model, tokenizer, cache_root: Path | None = None, stats=None):
    """The project's extraction and evaluation generation on ``model``: two batches on one rank and one on the
    other when split over two processes, unless the shares are padded."""
    from ao_calib.evaluation.generation import generate_completions
    from ao_calib.steering.activations import ActivationCache, PositionRule, extract_activations

    rows = [{"prompt": [{"role": "user", "content": p}]} for p in SHARDED_PROMPTS]
    # Generation first: on a sharded model that no forward pass has gathered yet
    completions = distributed.map_split(lambda share: generate_completions(
        model, tokenizer, share, chat_template_kwargs={"enable_thinking": False}, max_new_tokens=8, batch_size=2),
        rows)
    cache = ActivationCache(cache_root, "tiny") if cache_root is not None else None
    acts = extract_activations(model, tokenizer, SHARDED_PROMPTS, [0, 1], PositionRule("last_k", k=3), batch_size=2,
                               cache=cache, stats=stats)
    return [{str(k): v.tolist() for k, v in a.items()} for a in acts], completions


def _tiny_lora_model():
    import torch

    from ao_calib.config.compose import compose_run_config
    from ao_calib.models import loading as models

    cfg = compose_run_config(["experiment=function_call_tiny"])
    torch.manual_seed(0)  # the same LoRA initialisation in every process
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    return models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora), \
        models.load_tokenizer(source, cfg.model)


def _sharded_extraction_and_evaluation(rank: int, port: int, out: str) -> None:
    """The tiny model sharded by FSDP2 over two processes: extraction and evaluation generation through the sharded
    model, with a cache; then again with every file found (no pass), then with rank 1 finding none of them."""
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1",
                      MASTER_PORT=str(port), ACCELERATE_USE_FSDP="true")
    import torch.distributed as dist
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor

    from ao_calib.runtime import sharding
    from ao_calib.steering.activations import ExtractionStats
    from ao_calib.steering.layout import get_decoder_layers

    dist.init_process_group("gloo", rank=rank, world_size=2)
    model, tokenizer = _tiny_lora_model()
    for layer in get_decoder_layers(model):
        fully_shard(layer)
    model = sharding.for_generation(fully_shard(model))
    local = sum(p.to_local().numel() if isinstance(p, DTensor) else p.numel() for p in model.parameters())
    cache, empty = Path(out, "cache"), Path(out, "empty")
    first, hits, misses = ExtractionStats(), ExtractionStats(), ExtractionStats()
    acts, completions = _extraction_and_generation(model, tokenizer, cache, first)
    dist.barrier()  # the main process writes the files after the gather: counted once it is done
    files_after_first = len(list(cache.rglob("*.safetensors")))
    again, _ = _extraction_and_generation(model, tokenizer, cache, hits)
    # Rank 1 cannot read the cache (an empty folder): every rank runs what any rank missed, and only the main
    # process writes, into its own folder.
    once_more, _ = _extraction_and_generation(model, tokenizer, empty if rank == 1 else cache, misses)
    Path(out, f"{rank}.json").write_text(json.dumps({
        "acts": acts, "again": again, "once_more": once_more, "completions": completions,
        "local": local, "full": sum(p.numel() for p in model.parameters()), "files": files_after_first,
        "stats": [vars(first), vars(hits), vars(misses)], "empty": len(list(empty.rglob("*"))) if empty.exists() else 0}))
    dist.destroy_process_group()


def test_extraction_and_evaluation_through_an_fsdp2_sharded_model_match_one_process(tmp_path):
    """FSDP2 applied by ``fully_shard`` (accelerate shards on GPUs only): the project's extraction gives one
    process's activations to 1e-6 and the uneven evaluation finishes (a bounded wait fails a hang) with one
    process's greedy completions; the cache is written once, by the main process, and a rank that misses a file the
    other one reads does not leave the other waiting."""
    model, tokenizer = _tiny_lora_model()  # built once, here, before both processes load it
    want_acts, want_completions = _extraction_and_generation(model, tokenizer)
    spawn_two(_sharded_extraction_and_evaluation, tmp_path, timeout=180)
    results = [json.loads((tmp_path / f"{r}.json").read_text()) for r in range(2)]
    for r in results:
        assert r["local"] * 2 == r["full"]  # each process holds half of every parameter
        for got in (r["acts"], r["again"], r["once_more"]):
            assert len(got) == len(want_acts)
            for a, b in zip(got, want_acts):
                assert a.keys() == b.keys()
                for layer in a:
                    torch_close(a[layer], b[layer], 1e-6)
        assert r["completions"] == want_completions
        assert r["files"] == len(SHARDED_PROMPTS)
        first, hits, misses = r["stats"]
        assert first["forward_passes"] == 2 and first["cache_hits"] == 0  # 3 and 2 prompts, both in two passes
        assert hits["forward_passes"] == 0 and hits["cache_hits"] == len(SHARDED_PROMPTS)
        assert misses["forward_passes"] == 2 and misses["cache_hits"] == 0
    assert results[1]["empty"] == 0  # rank 1 wrote nothing


def torch_close(got, want, tolerance: float) -> None:
    import torch

    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=0, atol=tolerance)
