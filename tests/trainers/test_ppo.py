"""The PPO trainer: GAE and its helpers against hand computation, the config mapping, a toy task it must learn
(with a falling value loss), the saved critic (loaded with a finished stage and before a resumed one trains on),
and the frozen reference adapter."""

from __future__ import annotations

import collections
import random

import pytest
import torch
from datasets import Dataset

from ao_calib.config.compose import compose_run_config
from ao_calib.core.errors import AOCalibError
from ao_calib.models import loading as models
from ao_calib.rewards import RewardPhase, RewardSchedule
from ao_calib.runs.run_dir import RunDir
from ao_calib.trainers import TrainerSetup
from ao_calib.trainers.common import generation_kwargs
from ao_calib.trainers.config import PPOTrainerConfig
from ao_calib.trainers.ppo import (
    VALUE_HEAD_FILE,
    PPOConfig,
    PPOTrainer,
    build_ppo_config,
    explained_variance,
    gae,
    masked_whiten,
)
from ao_calib.trainers.stage import MAIN, StagePlan, StageStart, _train_or_load, load_checkpoint

GENERATION = generation_kwargs(PPOTrainerConfig())  # what the builder passes a PPO stage with default settings
WORDS = ("river stone lamp cloud violin garden engine pepper window candle forest copper ticket harbor "
         "marble thunder yellow quiet rapid gentle orange silver winter summer market planet").split()


def test_gae_matches_hand_computation():
    rewards = torch.tensor([[0.0, 0.0, 1.0, 0.0], [0.5, -1.0, 0.0, 0.0]])
    values = torch.tensor([[0.2, 0.4, 0.6, 9.0], [0.1, 0.3, 9.0, 9.0]])  # 9.0: past the end, must be ignored
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    gamma, lam = 0.9, 0.8
    advantages, returns = gae(rewards, values, mask, gamma, lam)

    def by_hand(r, v):
        out, running = [0.0] * len(r), 0.0
        for t in reversed(range(len(r))):
            delta = r[t] + gamma * (v[t + 1] if t + 1 < len(r) else 0.0) - v[t]
            running = delta + gamma * lam * running
            out[t] = running
        return out

    expected = [by_hand([0.0, 0.0, 1.0], [0.2, 0.4, 0.6]) + [0.0], by_hand([0.5, -1.0], [0.1, 0.3]) + [0.0, 0.0]]
    assert torch.allclose(advantages, torch.tensor(expected), atol=1e-6)
    assert torch.allclose(returns, torch.tensor(expected) + values * mask, atol=1e-6)


def test_gae_with_gamma_and_lambda_one_is_reward_to_go_minus_value():
    rewards, values = torch.tensor([[0.0, 0.0, 2.0]]), torch.tensor([[0.5, 1.0, 1.5]])
    advantages, returns = gae(rewards, values, torch.ones(1, 3), 1.0, 1.0)
    assert torch.allclose(advantages, torch.tensor([[1.5, 1.0, 0.5]]))
    assert torch.allclose(returns, torch.tensor([[2.0, 2.0, 2.0]]))


def test_whitening_and_explained_variance():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, 0.0, -7.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])
    white = masked_whiten(x, mask)
    kept = white[mask.bool()]
    assert kept.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert (kept ** 2).mean().item() == pytest.approx(1.0, abs=1e-4)
    assert white[~mask.bool()].abs().sum().item() == 0.0
    returns = torch.tensor([[1.0, 2.0, 3.0]])
    assert explained_variance(returns, returns, torch.ones(1, 3)) == pytest.approx(1.0)
    assert explained_variance(torch.zeros(1, 3) + 2.0, returns, torch.ones(1, 3)) == pytest.approx(0.0)


def compose_ppo(tmp_path, *overrides):
    return compose_run_config(["task=tool_json", "model=tiny_qwen3", "trainer=ppo", "reward=tool_json", *overrides])


def ppo_args(cfg, out, weights):
    """PPOConfig for ``cfg.trainer``, writing checkpoints under ``out/checkpoints``, with these reward weights."""
    schedule = RewardSchedule(tuple(f"r{i}" for i in range(len(weights))), (RewardPhase(None, tuple(weights)),))
    return build_ppo_config(TrainerSetup(cfg.model, None, None, None, RunDir(out), schedule), cfg.trainer)


def test_config_samples_once_per_prompt_and_maps_epochs_and_minibatches(tmp_path):
    cfg = compose_ppo(tmp_path, "trainer.batch_size=8", "trainer.num_mini_batches=2", "trainer.micro_batch_size=2",
                      "trainer.ppo_epochs=3", "trainer.kl_coef=0.02")
    args = ppo_args(cfg, tmp_path, (1.0, 1.0, 1.0, 1.0))
    assert args.num_generations == 1 and args.generation_batch_size == 8
    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps, args.steps_per_generation) == (2, 2, 4)
    assert args.num_iterations == 3 and args.beta == 0.02
    with pytest.raises(AOCalibError, match="num_mini_batches"):
        bad = compose_ppo(tmp_path, "trainer.batch_size=6", "trainer.num_mini_batches=4")
        ppo_args(bad, tmp_path, (1.0,))
    with pytest.raises(ValueError, match="at least 2 rollouts"):
        PPOConfig(output_dir=str(tmp_path), per_device_train_batch_size=1, gradient_accumulation_steps=1,
                  use_cpu=True, report_to="none")


def tiny_policy(cfg):
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(source)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora)
    return model, tokenizer


def prompts(n: int, seed: int) -> list[list[dict]]:
    rng = random.Random(seed)
    return [[{"role": "user", "content": " ".join(rng.choices(WORDS, k=5))}] for _ in range(n)]


def first_token_probability(model, tokenizer, chats, token_id: int) -> float:
    """Mean probability of ``token_id`` as the first completion token: the held-out metric of the toy task."""
    texts = [tokenizer.apply_chat_template(c, tokenize=False, add_generation_prompt=True, enable_thinking=False)
             for c in chats]
    model.eval()
    with torch.no_grad():
        probs = [model(**tokenizer(t, return_tensors="pt")).logits[0, -1].softmax(-1)[token_id].item() for t in texts]
    model.train()
    return sum(probs) / len(probs)


def most_sampled_token(model, tokenizer, chats) -> tuple[int, float]:
    """The token the untrained model samples most often in 6-token completions, and its frequency."""
    counts: collections.Counter = collections.Counter()
    for chat in chats:
        text = tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True, enable_thinking=False)
        ids = tokenizer(text, return_tensors="pt")
        out = model.generate(**ids, do_sample=True, max_new_tokens=6, temperature=1.0, pad_token_id=tokenizer.pad_token_id)
        counts.update(out[0, ids["input_ids"].shape[1]:].tolist())
    token, count = counts.most_common(1)[0]
    return token, count / sum(counts.values())


def test_ppo_learns_to_prefer_one_token_and_its_value_loss_falls(tmp_path):
    cfg = compose_ppo(tmp_path, "trainer.lr=1e-3", "trainer.batch_size=8", "trainer.ppo_epochs=2",
                      "trainer.max_completion_length=6", "trainer.max_steps=28", "trainer.logging_steps=2",
                      "trainer.save_steps=1000", "trainer.kl_coef=0.01", "trainer.vf_coef=0.5")
    torch.manual_seed(0)
    model, tokenizer = tiny_policy(cfg)
    train, held_out = prompts(64, seed=1), prompts(32, seed=2)
    # A token the untrained model already samples now and then, so there is a signal to follow.
    target, frequency = most_sampled_token(model, tokenizer, train[:16])
    assert frequency < 0.3

    def prefer_target(completions, completion_ids, **kwargs):
        return [sum(t == target for t in ids) / len(ids) for ids in completion_ids]

    before = first_token_probability(model, tokenizer, held_out, target)
    trainer = PPOTrainer(model=model, reward_funcs=[prefer_target], processing_class=tokenizer, **GENERATION,
                         args=ppo_args(cfg, tmp_path, (1.0,)),
                         train_dataset=Dataset.from_list([{"prompt": p} for p in train]))
    trainer.train()
    after = first_token_probability(model, tokenizer, held_out, target)

    logs = [row for row in trainer.state.log_history if "ppo/value_loss" in row]
    rewards, value_losses = [row["reward"] for row in logs], [row["ppo/value_loss"] for row in logs]
    assert {"ppo/policy_loss", "ppo/explained_variance", "ppo/kl", "ppo/clip_fraction", "kl"} <= logs[-1].keys()
    # Measured: reward 0.25 -> 0.96, value loss 0.038 -> 0.010 (means of the first and last 4 logs), held-out
    # first-token probability 0.21 -> 0.96.
    assert sum(rewards[-4:]) / 4 > sum(rewards[:4]) / 4 + 0.4, rewards
    assert sum(value_losses[-4:]) / 4 < 0.7 * sum(value_losses[:4]) / 4, value_losses
    assert after > before + 0.3, (before, after)


def critic_trainers(tmp_path):
    """(a policy, a builder of PPO trainers rewarding length over it or a fresh one) whose critic moves in 2 steps,
    saved at each."""
    cfg = compose_ppo(tmp_path, "trainer.batch_size=2", "trainer.ppo_epochs=1", "trainer.max_completion_length=4",
                      "trainer.max_steps=2", "trainer.save_steps=1", "trainer.lr=1e-2")
    model, tokenizer = tiny_policy(cfg)
    dataset = Dataset.from_list([{"prompt": p} for p in prompts(8, seed=3)])

    def length_reward(completions, completion_ids, **kwargs):
        return [float(len(ids)) for ids in completion_ids]

    def make_trainer(policy, out, callbacks=()):
        return PPOTrainer(model=policy or tiny_policy(cfg)[0], reward_funcs=[length_reward],
                          processing_class=tokenizer, **GENERATION, args=ppo_args(cfg, out, (1.0,)),
                          train_dataset=dataset, callbacks=list(callbacks))

    return model, make_trainer


def test_critic_is_saved_and_restored_with_checkpoints(tmp_path):
    model, make_trainer = critic_trainers(tmp_path)
    trainer = make_trainer(model, tmp_path / "a")
    trainer.train()
    saved = tmp_path / "a" / "checkpoints" / "checkpoint-2" / VALUE_HEAD_FILE
    assert saved.is_file()
    trained_bias = trainer.value_head.bias.item()
    assert trained_bias != 0.0  # the critic moved from its zero start

    resumed = make_trainer(None, tmp_path / "b")
    load_checkpoint(resumed, str(saved.parent))  # what a resumed run does with a stage that had finished
    assert resumed.value_head.bias.item() == pytest.approx(trained_bias)


def test_a_resumed_stage_has_its_critic_back_before_it_trains_on(tmp_path):
    from types import SimpleNamespace

    from safetensors.torch import load_file
    from transformers import TrainerCallback

    from ao_calib.runtime.interrupts import SignalWatch
    from ao_calib.trainers.callbacks import MetricsFileCallback

    model, make_trainer = critic_trainers(tmp_path)

    class CriticAtStart(TrainerCallback):
        bias = None

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            CriticAtStart.bias = model.ppo_value_head.bias.item()

    make_trainer(model, tmp_path / "a").train()
    checkpoint = tmp_path / "a" / "checkpoints" / "checkpoint-1"
    saved_bias = load_file(str(checkpoint / VALUE_HEAD_FILE))["bias"].item()
    assert saved_bias != 0.0

    resumed = make_trainer(None, tmp_path / "b", [CriticAtStart()])
    plan = StagePlan(MAIN, PPOTrainerConfig(), StageStart.resume, str(checkpoint), 1)
    run = SimpleNamespace(watch=SignalWatch(), run_dir=RunDir(tmp_path / "b"))
    _train_or_load(plan, resumed, run, MetricsFileCallback(RunDir(tmp_path / "b").metrics, stage=MAIN))
    assert CriticAtStart.bias == pytest.approx(saved_bias)  # not the zero start
    assert resumed.state.global_step == 2


def test_reference_is_a_frozen_copy_of_the_starting_adapter(tmp_path):
    cfg = compose_ppo(tmp_path, "trainer.batch_size=2", "trainer.max_steps=1", "trainer.max_completion_length=4")
    model, tokenizer = tiny_policy(cfg)
    with torch.no_grad():  # stands for an SFT-trained adapter: non-zero LoRA B
        for name, param in model.named_parameters():
            if "lora_B" in name:
                param.normal_(std=0.05)
    starting = {n: p.detach().clone() for n, p in model.named_parameters() if ".default." in n}
    trainer = PPOTrainer(model=model, reward_funcs=[lambda completions, **kw: [1.0] * len(completions)], **GENERATION,
                         processing_class=tokenizer, args=ppo_args(cfg, tmp_path, (1.0,)),
                         train_dataset=Dataset.from_list([{"prompt": p} for p in prompts(4, seed=4)]))
    trainer.train()
    params = dict(model.named_parameters())
    assert "ref" in model.peft_config
    for name, value in starting.items():
        ref = params[name.replace(".default.", ".ref.")]
        assert not ref.requires_grad and torch.equal(ref, value)
    assert any(not torch.equal(params[n], v) for n, v in starting.items())  # the policy itself trained


@pytest.fixture(scope="module")
def untrained_policy(tmp_path_factory):
    """The tiny policy as it starts, for the tests that only generate from it (generation leaves it as it was)."""
    return tiny_policy(compose_ppo(tmp_path_factory.mktemp("policy")))


def test_sampled_evaluation_is_seeded_and_leaves_the_callers_random_state_alone(untrained_policy):
    from ao_calib.evaluation.generation import generate_completions

    model, tokenizer = untrained_policy
    rows = [{"prompt": p} for p in prompts(4, seed=5)]

    def sample(temperature, seed=0):
        return generate_completions(model, tokenizer, rows, chat_template_kwargs={"enable_thinking": False},
                                    max_new_tokens=8, batch_size=4, temperature=temperature, seed=seed)

    torch.manual_seed(123)
    state = torch.get_rng_state()
    first = sample(1.0)
    assert torch.equal(torch.get_rng_state(), state)
    assert sample(1.0) == first and sample(1.0, seed=1) != first
    assert sample(None) == sample(0) != first  # greedy


def test_evaluation_batches_rows_by_length_and_returns_completions_in_row_order(untrained_policy):
    """generate_completions batches prompts of similar length (less padding); each completion still belongs to its
    row: greedy answers in batches of 3 over rows of very different lengths equal the answers one row at a time."""
    from ao_calib.evaluation.generation import generate_completions

    model, tokenizer = untrained_policy
    texts = [chat[0]["content"] for chat in prompts(6, seed=7)]
    rows = [{"prompt": [{"role": "user", "content": " ".join([text] * (1 + 3 * (i % 2)))}]}
            for i, text in enumerate(texts)]

    def greedy(batch_size):
        return generate_completions(model, tokenizer, rows, chat_template_kwargs={"enable_thinking": False},
                                    max_new_tokens=6, batch_size=batch_size)

    one_by_one = greedy(1)
    assert greedy(3) == one_by_one and len(set(one_by_one)) > 1
