"""The fast rollout path against transformers' generate and TRL's own path: the same tokens (greedy, and sampled
from a fixed seed), steering in the prefill of every rollout, and trained weights, log-probs and gradients that the
path never touches."""

from __future__ import annotations

from collections import Counter
from contextlib import nullcontext

import pytest
import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM, AutoTokenizer

from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import default_of
from ao_calib.models.fast_generation import (
    MIN_SHARED_PREFIX,
    FastGenerator,
    Sampling,
    common_prefix,
    first_row_of_each_group,
    shared_prompts,
)
from ao_calib.models.merged_copy import MergedCopy
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model
from ao_calib.steering import SteeringBatch, steer
from ao_calib.trainers import build_trainer
from ao_calib.trainers.callbacks import MetricsFileCallback
from ao_calib.trainers.config import OnlineTrainerConfig
from ao_calib_tasks.oracle.prompt import encode_oracle_prompt, placeholder_token_id

from tests.helpers.trainers import build_setup

MAX_NEW = 10
GROUP = 3  # completions per prompt, as TRL lists them: each prompt's copies in a row


@pytest.fixture(scope="module", params=["qwen3", "gemma3", "smollm2"])
def tiny_lora(request, offline_env):
    if request.param == "smollm2":  # a real pretrained Llama-layout model
        path = request.getfixturevalue("smollm2_source")
    else:
        path = ensure_tiny_model(TinyModelSpec(family=request.param), offline_env / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    # init_lora_weights=False: B is random too, so the adapter really changes the outputs.
    model = get_peft_model(base, LoraConfig(r=8, lora_alpha=16, target_modules="all-linear",
                                            init_lora_weights=False)).eval()
    return tokenizer, model


def oracle_rows(tokenizer):
    """Oracle prompts with placeholder runs of different lengths, each repeated GROUP times, and their vectors."""
    questions = [("Is this about cooking?", 2), ("Does it mention Paris?", 4), ("Is it a question?", 1)]
    prompts = [encode_oracle_prompt(tokenizer, 2, k, q) for q, k in questions]
    return [ids for ids, _ in prompts for _ in range(GROUP)], [pos for _, pos in prompts for _ in range(GROUP)]


def left_padded(rows, pad):
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask, width


def steering_for(rows, positions, width, dim):
    """Random vectors at each row's placeholders, shifted by its left padding (the same per prompt)."""
    gen = torch.Generator().manual_seed(7)
    vectors, shifted = [], []
    for i, (r, pos) in enumerate(zip(rows, positions)):
        if i % GROUP == 0:
            v = torch.randn(len(pos), dim, generator=gen)
        vectors.append(v)
        shifted.append([p + width - len(r) for p in pos])
    return SteeringBatch.from_rows(vectors, shifted)


def reference(model, tokenizer, rows, batch, **sampling):
    """transformers' generate on the peft model, steered by ``steer`` around the whole call."""
    ids, mask, width = left_padded(rows, tokenizer.pad_token_id)
    ctx = steer(model, batch, check_token_id=placeholder_token_id(tokenizer)) if batch is not None else nullcontext()
    with torch.no_grad(), ctx:
        out = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=MAX_NEW,
                             pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **sampling)
    eos = tokenizer.eos_token_id
    return [r[: next((i for i, t in enumerate(r) if t == eos), len(r) - 1) + 1] for r in out[:, width:].tolist()]


def fast(model, tokenizer, rows, batch, sampling, static_cache, stats=None):
    def prefill(gen_model, picked):
        index = torch.tensor(picked)
        return steer(gen_model, SteeringBatch(batch.vectors[index], batch.positions[index]),
                     check_token_id=placeholder_token_id(tokenizer), stats=stats)

    generator = FastGenerator(MergedCopy(model).model, static_cache=static_cache, max_cached_shapes=2,
                              stop_check_every=4)
    return generator.generate(rows, pad_id=tokenizer.pad_token_id, eos_ids=[tokenizer.eos_token_id],
                              max_new_tokens=MAX_NEW, sampling=sampling,
                              prefill_context=prefill if batch is not None else None)


# Every path on the tiny models; on SmolLM2 (a real model's Llama layout, ten times their cost a case) the steered
# rollout with the CPU's cache: the static cache is the CUDA path, and the unsteered rollout is the steered one less
# its hooks.
GREEDY_CASES = [(model, static, steered) for model in ("qwen3", "gemma3") for static in (False, True)
                for steered in (False, True)] + [("smollm2", False, True)]


@pytest.mark.parametrize(("tiny_lora", "static_cache", "steered"), GREEDY_CASES, indirect=["tiny_lora"],
                         ids=[f"{m}-{'steered' if s else 'unsteered'}-{'static' if c else 'dynamic'}_cache"
                              for m, c, s in GREEDY_CASES])
def test_greedy_rollouts_equal_generate_token_for_token(tiny_lora, static_cache, steered):
    tokenizer, model = tiny_lora
    rows, positions = oracle_rows(tokenizer)
    width = max(len(r) for r in rows)
    batch = steering_for(rows, positions, width, model.config.get_text_config().hidden_size) if steered else None
    stats = Counter()
    expected = reference(model, tokenizer, rows, batch, do_sample=False)
    got = fast(model, tokenizer, rows, batch, Sampling(do_sample=False), static_cache, stats)
    assert got == expected
    if steered:
        # One prefill pass, checked at the placeholders: once per distinct prompt, with either cache.
        assert stats["passes"] == 1
        assert stats["checked_rows"] == len(rows) // GROUP
        unsteered = reference(model, tokenizer, rows, None, do_sample=False)
        assert unsteered != expected  # the injection changes what is generated: the comparison can fail


def test_sampled_rollouts_equal_generate_for_a_fixed_seed(tiny_lora):
    """The sampler draws from the same distribution with the same random stream, so the seed gives the same
    tokens (temperature, top-k and top-p in transformers' order)."""
    tokenizer, model = tiny_lora
    rows, positions = oracle_rows(tokenizer)
    batch = steering_for(rows, positions, max(len(r) for r in rows), model.config.get_text_config().hidden_size)
    torch.manual_seed(11)
    expected = reference(model, tokenizer, rows, batch, do_sample=True, temperature=0.7, top_k=20, top_p=0.9)
    torch.manual_seed(11)
    got = fast(model, tokenizer, rows, batch, Sampling(temperature=0.7, top_k=20, top_p=0.9), static_cache=False)
    assert got == expected
    assert len({tuple(c) for c in got[:GROUP]}) > 1  # really sampled: one prompt's completions differ


DOCS = " ".join(f"{name}({args}): what {name} does to the file system." for name, args in (
    ("cd", "folder"), ("ls", "a"), ("wc", "file_name, mode"), ("mv", "source, destination"), ("cat", "file_name"),
    ("mkdir", "dir_name"), ("touch", "file_name"), ("echo", "content, file_name"), ("grep", "file_name, pattern"),
    ("multiply", "a, b"), ("add", "a, b"), ("sort", "file_name"))) * 2 + " Answer with calls only."
SHARED_CASES = [("qwen3", False), ("qwen3", True), ("smollm2", False)]


@pytest.mark.parametrize(("tiny_lora", "static_cache"), SHARED_CASES, indirect=["tiny_lora"],
                         ids=[f"{m}-{'static' if c else 'dynamic'}_cache" for m, c in SHARED_CASES])
def test_a_common_prefix_prefilled_once_gives_generates_tokens(tiny_lora, static_cache):
    """Episodes of one batch share a long system turn and go on differently (lengths too): the shared tokens run
    through the model once, and every row still decodes what transformers' generate decodes from its whole prompt."""
    tokenizer, model = tiny_lora
    system = tokenizer.encode(DOCS, add_special_tokens=False)
    assert len(system) >= MIN_SHARED_PREFIX
    tails = ["Go into 'orchard'.", "How many lines does 'memo.txt' have? Then multiply it by 3.", "ls"]
    rows = [system + tokenizer.encode(t, add_special_tokens=False) for t in tails for _ in range(2)]
    expected = reference(model, tokenizer, rows, None, do_sample=False)
    generator = FastGenerator(MergedCopy(model).model, static_cache=static_cache, max_cached_shapes=2,
                              stop_check_every=4, share_prefix=True)
    seen = []
    hook = generator.model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"].shape),
                                                     with_kwargs=True)
    try:
        got = generator.generate(rows, pad_id=tokenizer.pad_token_id, eos_ids=[tokenizer.eos_token_id],
                                 max_new_tokens=MAX_NEW, sampling=Sampling(do_sample=False))
    finally:
        hook.remove()
    assert got == expected
    assert seen[0] == (1, len(system))  # the system turn once
    assert seen[1] == (len(tails), max(len(r) for r in rows) - len(system))  # then each distinct prompt's rest


def test_evaluations_prefill_a_common_prefix_once_and_generate_what_they_generated(offline_env):
    """Held-out prompts that open with the same long system turn: one pass over it for the batch, and the same
    greedy answers as one prompt at a time (no sharing)."""
    from ao_calib.evaluation.generation import generate_completions

    path = ensure_tiny_model(TinyModelSpec(family="qwen3"), offline_env / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    rows = [{"prompt": [{"role": "system", "content": DOCS}, {"role": "user", "content": ask}]}
            for ask in ("Go into 'orchard'.", "How many lines does 'memo.txt' have?", "ls", "Multiply 3 by 4.")]
    kwargs = {"chat_template_kwargs": {"enable_thinking": False}, "max_new_tokens": MAX_NEW}
    seen = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: seen.append(kw["input_ids"].shape), with_kwargs=True)
    try:
        together = generate_completions(model, tokenizer, rows, batch_size=4, **kwargs)
    finally:
        hook.remove()
    assert seen[0][0] == 1 and seen[0][1] >= MIN_SHARED_PREFIX  # the system turn, once
    assert seen[1][0] == len(rows) and seen[1][1] < seen[0][1]  # then each prompt's rest
    assert together == generate_completions(model, tokenizer, rows, batch_size=1, **kwargs)


def test_the_common_prefix_leaves_every_prompt_a_token_of_its_own():
    assert common_prefix([[1, 2, 3, 4], [1, 2, 3, 5]]) == 3
    assert common_prefix([[1, 2], [1, 2, 3]]) == 1  # the shorter prompt keeps its last token
    assert common_prefix([[7, 2], [1, 2]]) == 0


def test_shared_prompts_groups_consecutive_copies():
    assert shared_prompts([[1, 2], [1, 2], [3], [3], [1, 2]]) == ([[1, 2], [3], [1, 2]], [0, 0, 1, 1, 2])


def test_one_row_of_each_group_is_picked_even_when_a_prompt_is_drawn_twice_in_a_row():
    rows = [[1, 2]] * 4 + [[3]] * 2 + [[1, 2]] * 2
    assert first_row_of_each_group(rows, 2) == [0, 2, 4, 6]
    assert first_row_of_each_group(rows, 4) == [0, 4, 6]  # a group split over processes: one row on each


@pytest.mark.parametrize("tiny_lora", ["qwen3"], indirect=True)  # the decoding loop is the same for every model
def test_a_greedy_member_decodes_greedily_and_leaves_the_sampled_rows_as_they_were(tiny_lora):
    """trainer.greedy_member: the first row of each group is the greedy answer (what an evaluation scores); the
    other rows draw the very tokens they draw without it (the same random stream)."""
    tokenizer, model = tiny_lora
    rows, _ = oracle_rows(tokenizer)
    generator = FastGenerator(MergedCopy(model).model, static_cache=False, max_cached_shapes=2, stop_check_every=4)

    def run(sampling, **extra):
        torch.manual_seed(5)
        return generator.generate(rows, pad_id=tokenizer.pad_token_id, eos_ids=[tokenizer.eos_token_id],
                                  max_new_tokens=MAX_NEW, sampling=sampling, **extra)

    greedy_rows = first_row_of_each_group(rows, GROUP)
    assert len(greedy_rows) == len(rows) // GROUP > 1
    sampled = run(Sampling(temperature=1.0))
    mixed = run(Sampling(temperature=1.0), greedy_rows=greedy_rows)
    greedy = run(Sampling(do_sample=False))
    for row in range(len(rows)):
        if row in greedy_rows:
            assert mixed[row] == greedy[row]
        else:
            assert mixed[row] == sampled[row]
    assert any(sampled[row] != greedy[row] for row in greedy_rows)  # sampling alone would differ: it can fail


def test_a_greedy_member_without_the_fast_path_is_refused_at_start_up():
    from ao_calib.config.compose import compose_run_config

    base = ["experiment=function_call_tiny", "trainer.greedy_member=true"]
    with pytest.raises(AOCalibError, match=r"trainer.greedy_member=true cannot run with trainer.fast_generation=false"):
        compose_run_config([*base, "trainer.fast_generation=false"])
    compose_run_config([*base, "trainer.fast_generation=true"])


def test_the_merged_copy_never_changes_the_trained_weights(offline_env):
    """In bf16, peft's merge/unmerge in place drifts; the copy only reads the trained weights, so 100 refreshes
    leave them bit for bit, and each refresh writes base + scale·B·A (fp32, cast once)."""
    path = ensure_tiny_model(TinyModelSpec(family="qwen3"), offline_env / "tiny_models")
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    copy = MergedCopy(model)
    for _ in range(100):
        copy.refresh()
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)

    trained = dict(model.named_modules())
    copied = dict(copy.model.named_modules())
    name = "model.layers.0.self_attn.q_proj"
    lora = trained[f"base_model.model.{name}"]
    expected = (lora.base_layer.weight.float() + lora.scaling["default"] * (
        lora.lora_B["default"].weight.float() @ lora.lora_A["default"].weight.float())).to(torch.bfloat16)
    assert torch.equal(copied[name].weight, expected)
    # Frozen weights outside LoRA are shared, not copied; LoRA-targeted ones are the copy's own.
    assert copied["model.embed_tokens"].weight.data_ptr() == trained["base_model.model.model.embed_tokens"].weight.data_ptr()
    assert copied[name].weight.data_ptr() != lora.base_layer.weight.data_ptr()

    # What the copy avoids: peft's merge/unmerge in place, in bf16, does not give the weights back.
    for _ in range(100):
        model.merge_adapter()
        model.unmerge_adapter()
    assert not torch.equal(lora.base_layer.weight, before[f"base_model.model.{name}.base_layer.weight"])


def test_evaluations_generate_from_the_one_merged_copy_and_write_what_the_adapter_writes(offline_env):
    """Evaluation generates from the merged copy the rollouts use (one per model, refreshed at each use, never in
    a state dict), and greedy completions equal the unmerged adapter's (float32)."""
    from ao_calib.evaluation.generation import generate_completions
    from ao_calib.models.merged_copy import generation_copy_refusal, merged_copy_of

    path = ensure_tiny_model(TinyModelSpec(family="qwen3"), offline_env / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False))
    keys = set(model.state_dict())
    assert generation_copy_refusal(model) is None
    merged = merged_copy_of(model)
    assert merged_copy_of(model) is merged and set(model.state_dict()) == keys

    rows = [{"prompt": [{"role": "user", "content": text}]} for text in ("Add 2 and 3.", "Name a colour, please.",
                                                                         "What is the capital of France?")]
    kwargs = dict(chat_template_kwargs={}, max_new_tokens=12, batch_size=2)
    assert generate_completions(merged.model, tokenizer, rows, **kwargs) == \
        generate_completions(model, tokenizer, rows, **kwargs)

    # Training moves the adapter; the next use of the copy carries the move.
    lora = dict(model.named_modules())["base_model.model.model.layers.0.mlp.down_proj"]
    with torch.no_grad():
        lora.lora_B["default"].weight.add_(0.5)
    copied = dict(merged_copy_of(model).model.named_modules())["model.layers.0.mlp.down_proj"]
    expected = lora.base_layer.weight + lora.scaling["default"] * (
        lora.lora_B["default"].weight @ lora.lora_A["default"].weight)
    assert torch.allclose(copied.weight, expected, atol=1e-6)
    # A model without an adapter has nothing to merge: evaluation generates from it as it is.
    plain = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    assert generation_copy_refusal(plain) == "the model has no LoRA layers"


# ------------------------------------------------------------------------------------------ in the trainers

ORACLE = ["experiment=oracle_tiny", "task.activations.positions=window", "task.activations.window_min=1",
          "task.activations.window_max=6", "trainer.batch_size=4", "trainer.num_generations=2",
          "trainer.micro_batch_size=4", "trainer.max_steps=1", "trainer.save_steps=1000",
          "trainer.max_completion_length=8", "trainer.lora.dropout=0.0", "trainer.fast_generation=true"]


def build(tmp_path, overrides):
    setup, cfg = build_setup(tmp_path, overrides)
    return build_trainer(setup, cfg.trainer), setup.steering, setup.data


def rollouts(trainer, rows, fast_path: bool, seed: int = 5):
    trainer.fast_generation = fast_path
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    torch.manual_seed(seed)
    completions, _ = trainer._generate_single_turn(prompt_ids, None, {}, trainer.num_generations)
    return completions


def lora_grads(model, input_ids):
    model.zero_grad(set_to_none=True)
    logps = model(input_ids=input_ids).logits.log_softmax(-1)
    logps.mean().backward()
    return logps.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def test_steered_grpo_samples_what_trl_samples_and_trains_unchanged(tmp_path):
    trainer, steering, data = build(tmp_path, ORACLE)
    rows = [data.train[i] for i in range(4) for _ in range(2)]
    trainer._scoring_rows = rows  # what SteeringMixin holds while TRL generates a batch
    model = trainer.model
    probe = torch.tensor([[5, 6, 7, 8, 9, 10]])
    logps_before, grads_before = lora_grads(model, probe)

    reference_completions = rollouts(trainer, rows, fast_path=False)
    steering.stats.clear()
    fast_completions = rollouts(trainer, rows, fast_path=True)
    assert fast_completions == reference_completions  # same seed, same sampler, same (steered) distribution
    # One steered prefill per distinct prompt, every placeholder checked.
    assert (steering.stats["generation_batches"], steering.stats["passes"], steering.stats["checked_rows"]) == (1, 1, 4)
    # The trainer's stop-check interval reaches the generator; on CPU, where a check costs nothing, every token.
    interval = default_of(OnlineTrainerConfig, "fast_generation_stop_check_every")
    assert trainer.fast_generation_stop_check_every == interval
    assert trainer._fast.stop_check_every == 1

    assert model.training  # the trained model is back in train mode
    logps_after, grads_after = lora_grads(model, probe)
    assert torch.equal(logps_before, logps_after)
    assert grads_before.keys() == grads_after.keys() and grads_before
    assert all(torch.equal(grads_before[n], grads_after[n]) for n in grads_before)

    # A whole step on the fast path: every pass (prefill, scoring, loss) injects at the placeholders.
    trainer._scoring_rows = None
    steering.stats.clear()
    trainer.train()
    stats = steering.stats
    # 8 completions in micro-batches of 4: 2 loss passes; the reference log-probs in 2 chunks of 4 rows.
    assert (stats["generation_batches"], stats["loss_batches"], stats["scoring_batches"]) == (1, 2, 2)
    assert stats["checked_rows"] == 4 + 2 * 4 + 2 * 4
    # The decode step's compiles and the caches held are in the step's metrics row (on CPU: uncompiled, no static
    # cache, so both 0).
    logged = MetricsFileCallback.of(trainer).last
    assert logged["fast_generation/compiles"] == 0.0 and logged["fast_generation/cached_shapes"] == 0.0


def test_the_same_question_about_two_texts_gets_a_prefill_for_each(tmp_path):
    """Two groups in a row with the same prompt ids and different activations (one question about two texts): the
    fast path prefills each with its own vectors, and samples what TRL's path samples."""
    trainer, steering, data = build(tmp_path, ORACLE)
    first = data.train[0]
    size = len(steering.vectors([first])[0])
    twins = ({**first, "activation_id": row["activation_id"]} for row in data.train
             if row["activation_id"] != first["activation_id"])
    twin = next(t for t in twins if len(steering.vectors([t])[0]) == size)
    rows = [first, first, twin, twin]
    trainer._scoring_rows = rows
    reference = rollouts(trainer, rows, fast_path=False)
    steering.stats.clear()
    assert rollouts(trainer, rows, fast_path=True) == reference
    assert steering.stats["checked_rows"] == 2  # one prefill row per text: shared within a group, not across


@pytest.mark.parametrize("trainer_name", ["rloo", "ppo"])
def test_rloo_and_ppo_sample_what_trl_samples(tmp_path, trainer_name):
    overrides = ["task=function_call", "model=tiny_qwen3", f"trainer={trainer_name}", "trainer.batch_size=2",
                 "trainer.max_completion_length=8", "trainer.lora.dropout=0.0", "trainer.fast_generation=true"]
    if trainer_name == "rloo":
        overrides.append("trainer.num_generations=2")
    trainer, _, data = build(tmp_path, overrides)
    group = trainer.num_generations if trainer_name == "rloo" else 1
    rows = [data.train[i] for i in range(2) for _ in range(group)]
    prompt_ids, _, _ = trainer._tokenize_prompts([r["prompt"] for r in rows])
    out = {}
    for fast_path in (False, True):
        trainer.fast_generation = fast_path
        torch.manual_seed(5)
        # RLOOTrainer's signature has no num_generations; GRPOTrainer's (PPO's base) does.
        extra = [] if trainer_name == "rloo" else [1]
        result = trainer._generate_single_turn(prompt_ids, None, {}, *extra)
        out[fast_path] = result if trainer_name == "rloo" else result[0]  # RLOO returns the ids alone
    assert out[True] == out[False] and len(out[True]) == len(rows)


def test_rollout_benchmark_runs_every_mode_and_the_step(capsys):
    """bench.rollout with the tiny shapes: the code a GPU run uses, end to end (its timings mean nothing here)."""
    from bench import rollout

    rows = rollout.main(["--shrink", "--batches", "4", "--new-tokens", "2", "--rounds", "1", "--step-rounds", "1",
                         "--steps", "1", "--rank", "8"])
    assert [row.split("|")[1].strip() for row in rows[:-1]] == list(rollout.MODES)
    assert "oracle GRPO step (fast generation)" in rows[-1]
    assert "round 1 oracle_fast" in capsys.readouterr().out


def test_the_smollm2_rollout_benchmark_times_trl_the_baseline_and_the_fast_path(smollm2_source):
    """bench.rollout --smollm2 on a tiny budget: TRL's path, the fast path at the baseline revision (from git) and
    today's, from one seed, so the two fast paths (the same sampler on CPU) write the same tokens."""
    from bench import rollout

    rows = rollout.main(["--smollm2", "--tasks", "oracle", "--prompts", "2", "--group", "2", "--max-new-tokens", "3",
                         "--rounds", "1", "--warmup-rounds", "0"])
    assert [row.split("|")[2].strip() for row in rows] == list(rollout.SMOLLM2_MODES)
    assert rows[-1].split("|")[-2].strip() == "yes"


# ---------------------------------------------------------------------------------- cached shapes, compiles


def tiny_merged(family: str, root):
    path = ensure_tiny_model(TinyModelSpec(family=family), root / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model = get_peft_model(base, LoraConfig(r=8, target_modules="all-linear", init_lora_weights=False)).eval()
    return tokenizer, MergedCopy(model).model


def greedy(generator, tokenizer, rows, max_new):
    return generator.generate(rows, pad_id=tokenizer.pad_token_id, eos_ids=[-1], max_new_tokens=max_new,
                              sampling=Sampling(do_sample=False))


def test_static_caches_are_bounded_least_recently_used_first(offline_env):
    tokenizer, model = tiny_merged("qwen3", offline_env)
    rows = [tokenizer("a short prompt")["input_ids"]] * 2
    generator = FastGenerator(model, static_cache=True, compile_decode=False, max_cached_shapes=2, stop_check_every=4)
    first = greedy(generator, tokenizer, rows, 8)  # shape (2, 64)
    greedy(generator, tokenizer, rows * 2, 8)  # (4, 64)
    assert generator.cached_shapes == [(2, 64), (4, 64)] and generator.evictions == 0
    greedy(generator, tokenizer, rows, 8)  # (2, 64) again: reused, now the most recently used
    assert generator.cached_shapes == [(4, 64), (2, 64)] and generator.evictions == 0
    greedy(generator, tokenizer, rows, 70)  # (2, 128): a third shape evicts the least recently used, (4, 64)
    assert generator.cached_shapes == [(2, 64), (2, 128)] and generator.evictions == 1
    greedy(generator, tokenizer, rows * 2, 8)  # (4, 64) comes back in a new cache: (2, 64) goes
    assert generator.cached_shapes == [(2, 128), (4, 64)] and generator.evictions == 2
    assert greedy(generator, tokenizer, rows, 8) == first  # a rebuilt cache decodes the same tokens
    with pytest.raises(ValueError, match="max_cached_shapes"):
        FastGenerator(model, static_cache=True, max_cached_shapes=0, stop_check_every=4)


def test_compiles_are_counted_and_sliding_window_models_decode_uncompiled(offline_env):
    """The decode step's compiles are counted from the compiler's own graph counter (eager backend: dynamo
    traces and guards as it does for inductor, without code generation). A new shape compiles once; Gemma 3's
    sliding-window cache recompiles at every token until the compiler's limit, so it is not compiled by default."""
    tokenizer, model = tiny_merged("qwen3", offline_env)
    rows = [tokenizer("a short prompt")["input_ids"]] * 2
    torch._dynamo.reset()
    generator = FastGenerator(model, static_cache=True, compile_decode=True, compile_backend="eager",
                              max_cached_shapes=2, stop_check_every=4)
    eager = FastGenerator(model, static_cache=True, compile_decode=False, max_cached_shapes=2, stop_check_every=4)
    assert greedy(generator, tokenizer, rows, 12) == greedy(eager, tokenizer, rows, 12)
    assert generator.compiles == 1 and eager.compiles == 0
    greedy(generator, tokenizer, rows, 12)
    assert generator.compiles == 1  # the same shape replays the compiled step
    greedy(generator, tokenizer, rows * 2, 12)
    assert generator.compiles == 2  # a new batch size: one recompile

    tokenizer, gemma = tiny_merged("gemma3", offline_env)
    from ao_calib.models.fast_generation import has_sliding_window

    assert has_sliding_window(gemma.config) and not has_sliding_window(model.config)
    torch._dynamo.reset()
    forced = FastGenerator(gemma, static_cache=True, compile_decode=True, compile_backend="eager",
                           max_cached_shapes=2, stop_check_every=4)
    greedy(forced, tokenizer, [tokenizer("a short prompt")["input_ids"]] * 2, 4)
    assert forced.compiles == 3  # one per decoded token (3 decode steps), below the compiler's recompile limit
    assert not FastGenerator(gemma, static_cache=True, max_cached_shapes=2,
                             stop_check_every=4).compile_decode  # the default: uncompiled
    torch._dynamo.reset()


def test_a_static_cache_past_the_sliding_window_is_filled_as_a_full_prefill_would_fill_it(offline_env):
    """Gemma 3 with an 8-token window and longer prompts: the static sliding-window layers, filled from one prefill
    per distinct prompt, decode what generate decodes (steered), and each prompt's placeholders are checked once."""
    path = ensure_tiny_model(TinyModelSpec(family="gemma3", sliding_window=8), offline_env / "tiny_models")
    tokenizer = AutoTokenizer.from_pretrained(path)
    torch.manual_seed(0)
    model = get_peft_model(AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32),
                           LoraConfig(r=8, lora_alpha=16, target_modules="all-linear", init_lora_weights=False)).eval()
    rows, positions = oracle_rows(tokenizer)
    assert min(len(r) for r in rows) > 8  # every prompt overflows the window
    width = max(len(r) for r in rows)
    batch = steering_for(rows, positions, width, model.config.get_text_config().hidden_size)
    stats = Counter()
    expected = reference(model, tokenizer, rows, batch, do_sample=False)
    assert fast(model, tokenizer, rows, batch, Sampling(do_sample=False), True, stats) == expected
    assert stats["checked_rows"] == len(rows) // GROUP


@pytest.mark.parametrize("static_cache", [False, True], ids=["dynamic_cache", "static_cache"])
def test_finished_rows_are_checked_every_k_tokens_and_the_completions_stay_the_same(offline_env, static_cache):
    """The decode loop asks whether every row has ended only every ``stop_check_every`` steps (on a GPU each ask
    waits for the device): the completions are the same for any k, and it stops at the first check after the
    last row ends, or at max_new_tokens."""
    tokenizer, model = tiny_merged("qwen3", offline_env)
    rows = [tokenizer(text)["input_ids"] for text in ("a short prompt", "a somewhat longer prompt here")
            for _ in range(2)]

    def run(k, eos_ids, max_new=12):
        generator = FastGenerator(model, static_cache=static_cache, compile_decode=False, stop_check_every=k,
                                  max_cached_shapes=2)
        out = generator.generate(rows, pad_id=tokenizer.pad_token_id, eos_ids=eos_ids, max_new_tokens=max_new,
                                 sampling=Sampling(do_sample=False))
        return out, generator.decode_steps

    unstopped, steps = run(1, [-1])
    assert steps == 11 and all(len(c) == 12 for c in unstopped)
    # Each row's third token ends it: every row has ended by step 2, some maybe earlier.
    eos = sorted({c[2] for c in unstopped})
    last = max(next(i for i, t in enumerate(c) if t in eos) for c in unstopped)
    expected, steps = run(1, eos)
    assert steps == last and all(c[-1] in eos for c in expected)
    for k in (2, 3, 5, 100):
        got, steps = run(k, eos)
        assert got == expected
        assert steps == min(-(-(last + 1) // k) * k - 1, 11)  # the first step k, 2k, ... at or after the last end
    with pytest.raises(ValueError, match="stop_check_every"):
        FastGenerator(model, stop_check_every=0, max_cached_shapes=2)


def test_the_stop_check_interval_is_a_trainer_setting_checked_at_start_up():
    from ao_calib.config.compose import check_values
    from ao_calib.config.compose import compose_run_config

    with pytest.raises(AOCalibError, match=r"trainer.fast_generation_stop_check_every=0: out of range"):
        check_values(compose_run_config(["experiment=function_call_tiny",
                                         "trainer.fast_generation_stop_check_every=0"]))
    cfg = compose_run_config(["experiment=function_call_tiny", "trainer.fast_generation_stop_check_every=16"])
    assert cfg.trainer.fast_generation_stop_check_every == 16


def test_fast_generation_on_a_quantized_model_is_refused_at_start_up():
    from ao_calib.config.compose import compose_run_config

    with pytest.raises(AOCalibError, match=r"trainer.fast_generation=true cannot run with model.quantization=4bit"):
        compose_run_config(["experiment=function_call_tiny", "model.quantization=4bit", "trainer.fast_generation=true"])
    compose_run_config(["experiment=function_call_tiny", "model.quantization=4bit"])  # without the fast path: fine
