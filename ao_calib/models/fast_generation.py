"""Fast rollouts for the online trainers (GRPO, RLOO, PPO), steered or not.

TRL 1.16 samples with ``generate`` on the training model as it is: peft's unmerged LoRA (two extra matmuls per
projection), dropout on (it never switches to eval mode), and a generation config with ``disable_compile=True``,
so every decoded token pays Python and kernel-launch overhead. This path instead:

* generates from a **merged copy** (``MergedCopy``): a plain transformers model that shares every frozen weight
  with the trained model and owns only the LoRA-targeted weights, refreshed in place before each rollout from
  base + scale·B·A computed in fp32. The trained weights are never merged in place, so nothing drifts, and the
  copy's tensors keep their addresses, so a captured CUDA graph stays valid;
* runs in **eval mode** (no dropout);
* runs **one prefill per distinct prompt** (and injected activations) and shares its KV cache with the prompt's
  G completions, with the dynamic cache and the static one alike;
* on CUDA, decodes with a **static KV cache and a compiled step** (``torch.compile``, CUDA graphs), and checks for
  finished completions only every ``trainer.fast_generation_stop_check_every`` tokens (a check waits for the GPU).

With ``trainer.greedy_member`` one completion of each group is decoded greedily (the answer an evaluation
scores) while the others sample; TRL's own path has no such option, so the key is refused at start-up where this
path is not taken.

Steering stays exact: activations are injected in the prefill only (the prompt is there, decode steps carry one
new token). The steering hooks are registered for the prefill forward pass and removed before the first decode
step, so the compiled decode step is traced, and replayed, without them.

Under FSDP/ZeRO-3 the trainer keeps TRL's own path (its gather of the sharded weights): a merged copy would be a
full weight copy per rank.
"""

from __future__ import annotations

import collections
import contextlib
import inspect
import logging
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch
from transformers import DynamicCache, StaticCache
from transformers.generation.logits_process import (
    LogitsProcessorList,
    MinPLogitsWarper,
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)
from trl import RLOOTrainer
from trl.trainer.utils import pad

from ao_calib.models.merged_copy import QUANTIZED_REFUSAL, MergedCopy, mergeable, merged_copy_of, quantized
from ao_calib.steering.layout import unwrap

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------------ sampling


@dataclass(frozen=True)
class Sampling:
    """The sampler TRL configures (``do_sample=True`` with these warpers), applied in transformers' order so the
    same seed draws the same tokens as ``generate``. ``do_sample=False`` is greedy."""

    do_sample: bool = True
    temperature: float = 1.0
    top_k: int | None = 0
    top_p: float = 1.0
    min_p: float | None = None
    repetition_penalty: float = 1.0

    def processors(self) -> LogitsProcessorList:
        out = LogitsProcessorList()
        if self.repetition_penalty != 1.0:
            out.append(RepetitionPenaltyLogitsProcessor(self.repetition_penalty))
        if not self.do_sample:
            return out
        if self.temperature != 1.0:
            out.append(TemperatureLogitsWarper(self.temperature))
        if self.top_k:
            out.append(TopKLogitsWarper(top_k=self.top_k))
        if self.top_p < 1.0:
            out.append(TopPLogitsWarper(top_p=self.top_p))
        if self.min_p is not None:
            out.append(MinPLogitsWarper(min_p=self.min_p))
        return out


# ---------------------------------------------------------------------------------------------- generator


def shared_prompts(prompt_ids: Sequence[Sequence[int]], inputs: Sequence[Hashable] | None = None
                   ) -> tuple[list[list[int]], list[int]]:
    """The distinct prompts of consecutive runs (TRL lists each prompt's G copies in a row) and, for every row,
    the index of its distinct prompt. ``inputs``: what else a row's prefill reads (the injected activations):
    consecutive rows share a prompt only where both their ids and their inputs are equal (the same question
    about two texts is two prompts)."""
    unique: list[list[int]] = []
    index: list[int] = []
    for row, ids in enumerate(prompt_ids):
        if not unique or list(ids) != unique[-1] or (inputs is not None and inputs[row] != inputs[row - 1]):
            unique.append(list(ids))
        index.append(len(unique) - 1)
    return unique, index


def first_row_of_each_group(prompt_ids: Sequence[Sequence[int]], group_size: int,
                            inputs: Sequence[Hashable] | None = None) -> list[int]:
    """One row per group: the first of each run of ``group_size`` copies of a prompt (TRL lists each prompt's
    copies in a row; the same prompt drawn twice in a row is two groups; a group split over two processes gets
    one such row on each)."""
    _, index = shared_prompts(prompt_ids, inputs)
    rows, start = [], 0
    for row, prompt in enumerate(index):
        if row and prompt != index[row - 1]:
            start = row
        if (row - start) % group_size == 0:
            rows.append(row)
    return rows


def left_pad(rows: Sequence[Sequence[int]], pad_id: int, device, multiple: int | None = None
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and attention mask, left-padded exactly as TRL pads a generation batch (the steering positions are
    found on that tensor)."""
    tensors = [torch.tensor(list(r), dtype=torch.long) for r in rows]
    ids = pad(tensors, padding_value=pad_id, padding_side="left", pad_to_multiple_of=multiple)
    mask = pad([torch.ones_like(t) for t in tensors], padding_value=0, padding_side="left",
               pad_to_multiple_of=multiple)
    return ids.to(device), mask.to(device)


# Shorter common prefixes (a chat template's default system line) are prefilled with their rows, as they always were;
# a pass of its own pays where a long system turn (function docs) opens every prompt.
MIN_SHARED_PREFIX = 128
PrefillContext = Callable[[torch.nn.Module, list[int]], contextlib.AbstractContextManager]


class FastGenerator:
    """Prefill then a token-by-token decode loop on ``model`` (a plain model in eval mode).

    ``static_cache`` preallocates the KV cache for the whole rollout and ``compile_decode`` compiles the decode
    step (CUDA graphs on a GPU); both default to on for CUDA only. The prefill runs once per distinct prompt and
    its keys and values are then repeated for the prompt's completions: into the dynamic cache, or written into
    the static one in place (its tensors keep their addresses). ``stop_check_every``: decode steps between checks
    for whether every row has ended (on an accelerator each check waits for it). ``share_prefix``: the tokens
    every prompt of a batch starts with (a long system turn, an episode's first turns) are prefilled once for the
    batch; not with a ``prefill_context`` that places anything by position in whole prompts (steering).
    """

    def __init__(self, model: torch.nn.Module, *, static_cache: bool | None = None,
                 compile_decode: bool | None = None,
                 max_cached_shapes: int, stop_check_every: int, compile_backend: str = "inductor",
                 share_prefix: bool = False):
        if max_cached_shapes < 1:
            raise ValueError(f"max_cached_shapes must be at least 1, got {max_cached_shapes}")
        if stop_check_every < 1:
            raise ValueError(f"stop_check_every must be at least 1, got {stop_check_every}")
        self.model = model
        self.cache_keyword = cache_keyword(model)
        on_cuda = next(model.parameters()).is_cuda
        self.stop_check_every = stop_check_every
        self.decode_steps = 0  # decode steps (forward passes after the prefill) of the latest rollout
        self.static_cache = on_cuda if static_cache is None else static_cache
        sliding = has_sliding_window(model.config)
        if compile_decode is None:
            # A sliding-window layer's static cache keeps its fill level as a Python int that the decode step
            # branches on, so the compiler guards on it and recompiles at every decoded token until its recompile
            # limit (8), then runs the step uncompiled (measured with tiny Gemma 3: 8 graphs for one 40-token
            # rollout; tests/models/test_fast_generation.py). Such models decode with the static cache, uncompiled.
            compile_decode = on_cuda and not sliding
            if on_cuda and sliding:
                log.info("fast generation: %s has sliding-window layers, whose static cache recompiles the decode "
                         "step at every token; decoding uncompiled", type(model).__name__)
        self.compile_decode = compile_decode and self.static_cache
        # A sliding-window layer's dynamic cache keeps only its window: a prefix prefilled apart would be cut.
        self.share_prefix = share_prefix and not sliding
        # Static caches by (batch, length), least recently used first. Each holds the whole rollout's keys and
        # values (about 4.8 GB at the Qwen3-8B shape, 32 sequences): a run whose prompt lengths wander would keep
        # one per shape forever, so at most ``max_cached_shapes`` stay and the least recently used goes.
        self.max_cached_shapes = max_cached_shapes
        self._caches: collections.OrderedDict[tuple[int, int], StaticCache] = collections.OrderedDict()
        self.evictions = 0
        self.compiles = 0  # graphs the compiler built for the decode step (each is a compile, or a recompile)
        self._step = self._decode_step
        if self.compile_decode:
            # CUDA graphs ("reduce-overhead") with inductor; another backend (tests: "eager") takes no mode.
            options = dict(mode="reduce-overhead") if compile_backend == "inductor" else {}
            self._step = torch.compile(self._decode_step, backend=compile_backend, dynamic=False, **options)

    def _decode_step(self, input_ids, position_ids, attention_mask, cache_position, cache):
        return self.model(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                          cache_position=cache_position, **{self.cache_keyword: cache}, use_cache=True,
                          logits_to_keep=1).logits[:, -1, :]

    def _static_cache(self, batch: int, length: int) -> StaticCache:
        # One cache per shape, reset between rollouts: its tensors keep their addresses for the CUDA graphs.
        key = (batch, length)
        cache = self._caches.get(key)
        if cache is not None:
            self._caches.move_to_end(key)
            cache.reset()
            return cache
        while len(self._caches) >= self.max_cached_shapes:
            _, evicted = self._caches.popitem(last=False)
            del evicted
            self.evictions += 1
            if torch.cuda.is_available():
                torch.cuda.empty_cache()  # give the evicted cache's memory back before the new one is allocated
        cache = self._caches[key] = StaticCache(config=self.model.config, max_cache_len=length)
        return cache

    @property
    def cached_shapes(self) -> list[tuple[int, int]]:
        """The (batch, length) shapes with a static cache, least recently used first."""
        return list(self._caches)

    @torch.no_grad()
    def generate(self, prompt_ids: Sequence[Sequence[int]], *, pad_id: int, eos_ids: Sequence[int],
                 max_new_tokens: int, sampling: Sampling, prefill_context: PrefillContext | None = None,
                 pad_to_multiple_of: int | None = None, greedy_rows: Sequence[int] = (),
                 prefill_inputs: Sequence[Hashable] | None = None) -> list[list[int]]:
        """Completion token ids of every row, up to and including its first EOS (as TRL keeps them). The
        ``greedy_rows`` take the most likely token where the others sample (the other rows draw the same tokens
        as without them). ``prefill_inputs``: what else each row's prefill reads, as ``shared_prompts`` takes it."""
        device = next(self.model.parameters()).device
        prefill_context = prefill_context or (lambda _model, _rows: contextlib.nullcontext())
        unique, index = shared_prompts(prompt_ids, prefill_inputs)
        first_rows = [index.index(u) for u in range(len(unique))]
        shared = common_prefix(unique) if self.share_prefix and len(unique) > 1 else 0
        shared = shared if shared >= MIN_SHARED_PREFIX else 0
        ids, mask = left_pad_after_prefix(prompt_ids, shared, pad_id, device, pad_to_multiple_of)
        batch, prompt_len = ids.shape
        # transformers' generate numbers positions from the first real token (left padding counts 0).
        positions = (mask.cumsum(-1) - 1).masked_fill(mask == 0, 0)
        # A static cache is filled from a plain dynamic one (full-length layers): a sliding-window layer's dynamic
        # cache keeps only the window, and the static layer needs the whole prompt to place it as its prefill would.
        prefill_cache = DynamicCache() if self.static_cache else DynamicCache(config=self.model.config)
        with prefill_context(self.model, first_rows):
            if shared:
                prefill_prefix(self.model, ids[:1, :shared], len(first_rows), prefill_cache, self.cache_keyword)
            logits = self.model(input_ids=ids[first_rows, shared:], attention_mask=mask[first_rows],
                                position_ids=positions[first_rows, shared:],
                                cache_position=torch.arange(shared, prompt_len, device=device),
                                **{self.cache_keyword: prefill_cache}, use_cache=True,
                                logits_to_keep=1).logits[:, -1, :]
        rows = torch.tensor(index, device=device)
        logits = logits.index_select(0, rows)
        if self.static_cache:
            total = prompt_len + max_new_tokens
            total = -(-total // 64) * 64  # round up, so prompts of nearby lengths reuse a compiled step
            cache = self._static_cache(batch, total)
            fill_static_cache(cache, prefill_cache, rows)
            full_mask = torch.cat([mask, mask.new_ones(batch, total - prompt_len)], dim=1)
        else:
            cache = prefill_cache
            if len(unique) != batch:
                for layer in cache.layers:
                    layer.keys = layer.keys.index_select(0, rows)
                    layer.values = layer.values.index_select(0, rows)
            full_mask = torch.cat([mask, mask.new_ones(batch, max_new_tokens)], dim=1)
        greedy = None  # a mask only where rows are greedy: the decode loop stays as it was without them
        if greedy_rows:
            greedy = torch.zeros(batch, dtype=torch.bool, device=device)
            greedy[list(greedy_rows)] = True
        return self._decode(ids, logits, cache, full_mask, positions[:, -1:], prompt_len, pad_id, eos_ids,
                            max_new_tokens, sampling, greedy)

    def _decode(self, ids, logits, cache, full_mask, last_position, prompt_len, pad_id, eos_ids, max_new_tokens,
                sampling: Sampling, greedy: torch.Tensor | None) -> list[list[int]]:
        device = ids.device
        processors = sampling.processors()
        eos = torch.tensor(list(eos_ids), device=device)
        unfinished = torch.ones(ids.size(0), dtype=torch.bool, device=device)
        # Made once: a tensor built from a Python int at each step would be a host-to-device copy that waits.
        cache_positions = torch.arange(prompt_len, prompt_len + max_new_tokens, device=device)
        sequence = ids
        generated = []
        self.decode_steps = 0
        for step in range(max_new_tokens):
            scores = processors(sequence, logits.float())
            if sampling.do_sample:
                token = torch.multinomial(torch.softmax(scores, dim=-1), num_samples=1).squeeze(1)
                if greedy is not None:
                    token = torch.where(greedy, scores.argmax(dim=-1), token)
            else:
                token = scores.argmax(dim=-1)
            token = torch.where(unfinished, token, torch.full_like(token, pad_id))
            generated.append(token)
            sequence = torch.cat([sequence, token[:, None]], dim=1)
            unfinished &= ~torch.isin(token, eos)
            if step == max_new_tokens - 1 or ((step + 1) % self.stop_check_every == 0
                                              and not bool(unfinished.any())):
                break
            cur = prompt_len + step
            attention = full_mask if self.static_cache else full_mask[:, : cur + 1]
            graphs = _compiled_graphs() if self.compile_decode else 0
            logits = self._step(token[:, None], last_position + step + 1, attention,
                                cache_positions[step:step + 1].clone(), cache).clone()
            self.decode_steps += 1
            if self.compile_decode:
                self.compiles += _compiled_graphs() - graphs
        completions = torch.stack(generated, dim=1).tolist()
        stops = set(eos_ids)
        out = []
        for row in completions:
            end = next((i for i, t in enumerate(row) if t in stops), len(row) - 1)
            out.append(row[: end + 1])
        return out


def common_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """How many tokens every prompt starts with, leaving each at least one of its own (its last token's logits
    come from its own pass)."""
    first, shortest = prompts[0], min(len(p) for p in prompts) - 1
    return next((i for i in range(shortest) if any(p[i] != first[i] for p in prompts)), max(shortest, 0))


def left_pad_after_prefix(rows: Sequence[Sequence[int]], shared: int, pad_id: int, device,
                          multiple: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Ids and attention mask laid out as [shared tokens][padding][each row's rest]: the first ``shared`` tokens,
    the same in every row, in front of ``left_pad`` of the rest (``shared`` 0: ``left_pad`` itself)."""
    ids, mask = left_pad([row[shared:] for row in rows], pad_id, device, multiple)
    head = ids.new_tensor(list(rows[0][:shared])).expand(ids.size(0), shared)
    return torch.cat([head, ids], dim=1), torch.cat([mask.new_ones(mask.size(0), shared), mask], dim=1)


def prefill_prefix(model: torch.nn.Module, prefix: torch.Tensor, copies: int, cache: DynamicCache,
                   keyword: str) -> None:
    """Runs the shared tokens ``prefix`` (one row) through ``model`` into ``cache`` once, then repeats their keys and
    values for ``copies`` rows: each row's rest is then prefilled on top of it."""
    model(input_ids=prefix, **{keyword: cache}, use_cache=True, logits_to_keep=1)
    for layer in cache.layers:
        layer.keys = layer.keys.expand(copies, -1, -1, -1).contiguous()
        layer.values = layer.values.expand(copies, -1, -1, -1).contiguous()


def fill_static_cache(cache: StaticCache, prefill: DynamicCache, rows: torch.Tensor) -> None:
    """Write each distinct prompt's prefilled keys and values into the static cache for every row of its group
    (``rows``: each row's distinct prompt), through each layer's own update, as a prefill of the full batch would:
    the cache then holds what it would have held, at the addresses it had."""
    if len(cache.layers) != len(prefill.layers):
        raise ValueError(f"the prefill filled {len(prefill.layers)} cache layers, the static cache has "
                         f"{len(cache.layers)}")
    for target, source in zip(cache.layers, prefill.layers):
        target.update(source.keys.index_select(0, rows), source.values.index_select(0, rows))


def cache_keyword(model: torch.nn.Module) -> str:
    """The name of a transformers model's KV-cache argument: transformers 5.24 renamed ``past_key_values`` to
    ``cache`` (the old name warns, and goes in 5.40); earlier releases know only the old one. A peft model is read
    through to the model it wraps."""
    return "cache" if "cache" in inspect.signature(unwrap(model).forward).parameters else "past_key_values"


def has_sliding_window(config) -> bool:
    """Whether any layer attends through a sliding window (Gemma 2/3, Mistral-style configs)."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    layer_types = getattr(text, "layer_types", None)
    if layer_types is not None:
        return any("sliding" in str(kind) for kind in layer_types)
    return getattr(text, "sliding_window", None) is not None and getattr(text, "use_sliding_window", True)


def _compiled_graphs() -> int:
    """Graphs torch.compile has built in this process so far (dynamo's own counter): read around the decode step,
    its change is the step's compiles and recompiles."""
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


# ----------------------------------------------------------------------------------------- trainer mixin


class FastGenerationMixin:
    """For TRL's online trainers: rollouts through ``FastGenerator`` on a merged copy when
    ``fast_generation=True`` (TRL's own path otherwise, and always with vLLM, transformers' continuous batching,
    images, FSDP or DeepSpeed). Subclasses that steer override ``_prefill_context`` and ``shares_prompt_prefix``."""

    shares_prompt_prefix = True  # the batch's common prompt prefix is prefilled once (not where steering places)

    def __init__(self, *args, fast_generation: bool, generation_merged_copy: bool, fast_generation_cache_shapes: int,
                 fast_generation_stop_check_every: int, greedy_member: bool = False, **kwargs):
        # the four generation settings come from the stage's OnlineTrainerConfig (trainers.common.build_online_trainer)
        super().__init__(*args, **kwargs)
        self.fast_generation = fast_generation
        self.greedy_member = greedy_member
        self.generation_merged_copy = generation_merged_copy
        self.fast_generation_cache_shapes = fast_generation_cache_shapes
        self.fast_generation_stop_check_every = fast_generation_stop_check_every
        self._compiles_logged = 0
        self._merged: MergedCopy | None = None
        self._fast: FastGenerator | None = None

    def _generates_fast(self, images=None, multimodal_fields=None) -> bool:
        return (self.fast_generation and not self.use_vllm
                and not getattr(self, "use_transformers_continuous_batching", False)
                and not getattr(self, "is_fsdp_enabled", False) and not getattr(self, "is_deepspeed_enabled", False)
                and not images and not multimodal_fields)

    def _prefill_context(self, model: torch.nn.Module, rows: list[int]) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def _prefill_inputs(self, batch: int) -> list[Hashable] | None:
        """What else each row's prefill reads besides its prompt (None: nothing); subclasses that steer return
        which activations each row gets."""
        return None

    def _generation_model(self) -> torch.nn.Module:
        trained = self.accelerator.unwrap_model(self.model)
        if self._fast is None:
            reason = mergeable(trained) if self.generation_merged_copy else "trainer.generation_merged_copy=false"
            if reason is None:
                self._merged = merged_copy_of(trained)
            else:
                log.info("fast generation without a merged copy (%s): the adapter stays unmerged", reason)
            if quantized(trained):  # refused at start-up (config.check_fast_generation); here for direct use
                raise ValueError(QUANTIZED_REFUSAL)
            model = self._merged.model if self._merged else trained
            # On CPU a check reads memory the host already holds: checking every token costs nothing.
            on_cpu = next(model.parameters()).device.type == "cpu"
            self._fast = FastGenerator(model, max_cached_shapes=self.fast_generation_cache_shapes,
                                       stop_check_every=1 if on_cpu else self.fast_generation_stop_check_every,
                                       share_prefix=self.shares_prompt_prefix)
        elif self._merged is not None:
            self._merged.refresh()  # the shared copy: an evaluation between two rollouts refreshes it too
        return self._fast.model

    def _log_generation_metrics(self) -> None:
        """Compiles of the decode step since the last rollout, and the static caches held: logged with the step's
        metrics (TRL averages a step's entries), so a recompiling run shows up in its own logs."""
        metrics = getattr(self, "_metrics", None)
        if metrics is None or self._fast is None:
            return
        mode = "train" if self.model.training else "eval"
        metrics[mode]["fast_generation/compiles"].append(float(self._fast.compiles - self._compiles_logged))
        metrics[mode]["fast_generation/cached_shapes"].append(float(len(self._fast.cached_shapes)))
        self._compiles_logged = self._fast.compiles

    def _sampling(self) -> Sampling:
        return Sampling(do_sample=True, temperature=self.temperature, top_k=self.top_k, top_p=self.top_p,
                        min_p=self.min_p, repetition_penalty=self.repetition_penalty)

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, *args, **kwargs):
        if not self._generates_fast(images, multimodal_fields):
            if self.greedy_member:  # start-up refuses the settings it knows; FSDP, DeepSpeed and images end here
                raise ValueError("trainer.greedy_member=true needs the fast generation path, which this run cannot "
                                 "take (FSDP, DeepSpeed, vLLM or images); set trainer.greedy_member=false")
            return super()._generate_single_turn(prompt_ids, images, multimodal_fields, *args, **kwargs)
        self._generation_model()  # builds the generator, or refreshes its merged copy from the trained weights
        trained = self.accelerator.unwrap_model(self.model)
        inputs = self._prefill_inputs(len(prompt_ids))
        was_training = trained.training
        trained.eval()  # the merged copy is always in eval mode; the unmerged fallback drops its dropout here
        try:
            completion_ids = self._fast.generate(
                prompt_ids, pad_id=self._tokenizer.pad_token_id, eos_ids=self.eos_token_ids,
                max_new_tokens=self.max_completion_length, sampling=self._sampling(),
                prefill_context=self._prefill_context, pad_to_multiple_of=self.pad_to_multiple_of,
                greedy_rows=first_row_of_each_group(prompt_ids, self.num_generations, inputs)
                if self.greedy_member else (), prefill_inputs=inputs)
        finally:
            trained.train(was_training)
        self._log_generation_metrics()
        # RLOOTrainer's _generate_single_turn returns the completion ids alone, GRPOTrainer's (PPO's) with log-probs.
        return completion_ids if isinstance(self, RLOOTrainer) else (completion_ids, None)
