"""A tiny stand-in for a pretrained Activation Oracle adapter (``task.stand_in``), so the seed's path (pretrained
oracle -> format warm-up -> GRPO with a judge) runs offline on the tiny models.

The real adapters (adamkarvonen/activation_oracles) answer questions about injected activations and never write an
``[epistemic status: NN]`` tag. The stand-in is made the same way in miniature: a LoRA on the tiny model, trained
with injection to answer the offline generator's yes/no questions with a bare "Yes" or "No", then saved as the hub
checkpoints are (``adapter_config.json`` + ``adapter_model.safetensors``) and loaded through the same
``PeftModel.from_pretrained`` path. It is built once per setting and cached.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
from pathlib import Path

import torch
from tqdm.auto import tqdm

from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import plain
from ao_calib.models import loading as models
from ao_calib.steering import steer
from ao_calib.steering.activations import extract_activations, layer_indices
from ao_calib.trainers.sft import end_of_turn

from .rows.generate import generate_splits
from .prompt import encode_oracle_prompt, placeholder_token_id
from .steering import position_rule

log = logging.getLogger(__name__)

FORMAT_VERSION = 2  # bump when the recipe below changes, so cached stand-ins are rebuilt


def stand_in_spec(task, model) -> dict:
    """Everything the stand-in depends on (the oracle task's settings, the model's); its hash names the cache
    folder."""
    return {
        "version": FORMAT_VERSION,
        "tiny": plain(model.tiny),
        "lora": plain(model.lora),
        "stand_in": plain(task.stand_in),
        "layer_percents": list(task.layer_percents),
        "injection": [task.injection_layer, model.steering_mode, task.steering_coefficient],
        "activations": plain(task.activations),
        "kinds": list(task.data.generate.kinds),
        "chat_template_kwargs": plain(model.chat_template_kwargs),
    }


def ensure_stand_in_oracle(task, context) -> Path:
    """The stand-in adapter's folder for this oracle task (``task``: its settings; ``context``: the run's
    ``TaskContext``), built on first use."""
    model = context.model
    if model.tiny is None:
        raise AOCalibError(f"task.stand_in.enabled=true builds a stand-in oracle for tiny models only; with "
                           f"model={model.name} set model.ao_lora_id to a pretrained Activation Oracle adapter")
    spec = stand_in_spec(task, model)
    key = hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]
    folder = Path(context.cache_dir) / "stand_in_oracles" / key
    if (folder / "adapter_model.safetensors").is_file():
        return folder
    building = folder.with_name(f"{key}.building-{os.getpid()}")
    shutil.rmtree(building, ignore_errors=True)
    _train(task, context, building)
    (building / "stand_in.json").write_text(json.dumps(spec, indent=1, sort_keys=True))
    try:
        building.rename(folder)  # atomic: a concurrent builder's finished folder is kept, this one discarded
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    log.info("stand-in oracle adapter: %s", folder)
    return folder


def _train(task, context, out: Path) -> None:
    settings, model_cfg = task.stand_in, context.model
    torch.manual_seed(settings.seed)
    source = models.model_source(model_cfg, context.cache_dir)
    tokenizer = models.load_tokenizer(source, model_cfg)
    model = models.attach_lora(models.load_base_model(model_cfg, source), model_cfg, context.lora_overrides)
    chat_kwargs = plain(model_cfg.chat_template_kwargs)
    rows, _ = generate_splits(settings.n_prompts, 1, 3, list(task.data.generate.kinds), settings.seed + 1000)
    layers = layer_indices(model.config.get_text_config().num_hidden_layers, task.layer_percents)
    acts = task.activations
    rule = position_rule(acts)
    prompts = sorted({r["prompt"] for r in rows})
    vectors = dict(zip(prompts, extract_activations(model, tokenizer, prompts, layers, rule,
                                                    batch_size=acts.batch_size)))
    suffix = end_of_turn(tokenizer, chat_kwargs)
    placeholder = placeholder_token_id(tokenizer)
    rng = random.Random(settings.seed)
    trained = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trained, lr=settings.lr, weight_decay=0.0)
    # As the SFT warm-up trains (TRL defaults): linear decay to 0 and gradients clipped at norm 1.
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 - step / settings.steps)
    device = next(model.parameters()).device
    model.train()
    for _ in tqdm(range(settings.steps), desc="stand-in oracle", leave=False):
        batch = rng.sample(rows, min(settings.batch_size, len(rows)))
        ids, labels, vecs, positions = [], [], [], []
        for row in batch:
            layer = rng.choice(layers)
            v = vectors[row["prompt"]][layer]
            prompt_ids, pos = encode_oracle_prompt(tokenizer, layer, len(v), row["question"], chat_kwargs)
            answer_ids = tokenizer.encode(row["answer"] + suffix, add_special_tokens=False)
            ids.append(prompt_ids + answer_ids)
            labels.append([-100] * len(prompt_ids) + answer_ids)
            vecs.append(v)
            positions.append(pos)
        width = max(map(len, ids))
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([x + [pad] * (width - len(x)) for x in ids], device=device)
        label_ids = torch.tensor([x + [-100] * (width - len(x)) for x in labels], device=device)
        attention = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids], device=device)
        with steer(model, vecs, positions, layer=task.injection_layer, mode=model_cfg.steering_mode,
                   coefficient=task.steering_coefficient, check_token_id=placeholder):
            loss = model(input_ids=input_ids, attention_mask=attention, labels=label_ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(trained, 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
    log.info("stand-in oracle trained for %d steps (last loss %.3f)", settings.steps, loss.item())
    model.save_pretrained(str(out))
