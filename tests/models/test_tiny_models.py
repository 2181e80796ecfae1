"""Tiny offline Qwen3 / Gemma 3 checkpoints: build, cache, load, templates, tokenizer, peft."""

from __future__ import annotations

import os

# Must be set before transformers / huggingface_hub are imported: they read it at import time.
os.environ["HF_HUB_OFFLINE"] = "1"

import operator
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from ao_calib.models.tiny import builder as tiny_models
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model, tiny_model_key
from ao_calib.models.tiny.corpus import corpus_texts
from ao_calib.steering.layout import UnsupportedLayoutError, decoder_layers_path, get_decoder_layers

transformers = pytest.importorskip("transformers")
from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

FAMILIES = ["qwen3", "gemma3"]
EXPECTED_CLASS = {"qwen3": "Qwen3ForCausalLM", "gemma3": "Gemma3ForConditionalGeneration"}


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tiny_cache")


@pytest.fixture(scope="module")
def built(cache_dir: Path) -> dict[str, Path]:
    return {f: ensure_tiny_model(TinyModelSpec(f), cache_dir) for f in FAMILIES}


@pytest.fixture(scope="module")
def loaded(built: dict[str, Path]) -> dict[str, tuple]:
    out = {}
    for fam, path in built.items():
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model, info = AutoModelForCausalLM.from_pretrained(path, local_files_only=True, output_loading_info=True)
        out[fam] = (tok, model.eval(), info)
    return out


def _ids(out) -> list[int]:
    # apply_chat_template(tokenize=True) returns a BatchEncoding in transformers 5, a list before.
    return list(out["input_ids"] if hasattr(out, "keys") else out)


# --------------------------------------------------------------------------- build and load


@pytest.mark.parametrize("family", FAMILIES)
def test_checkpoint_files_and_classes(family: str, built: dict[str, Path], loaded: dict) -> None:
    path = built[family]
    assert path.parent.name and path.name.startswith(f"{family}-")
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
                 "generation_config.json"):
        assert (path / name).is_file(), name
    tok, model, info = loaded[family]
    assert type(model).__name__ == EXPECTED_CLASS[family]
    assert not info["missing_keys"] and not info["unexpected_keys"]
    assert next(model.parameters()).dtype == torch.float32
    text_cfg = model.config.get_text_config()
    assert text_cfg.vocab_size == 4096 and len(tok) <= text_cfg.vocab_size
    assert tok.chat_template


def test_gemma_special_ids_inside_vocab(loaded: dict) -> None:
    tok, model, _ = loaded["gemma3"]
    cfg = model.config
    assert (tok.pad_token_id, tok.eos_token_id, tok.bos_token_id) == (0, 1, 2)
    assert tok.convert_tokens_to_ids("<unk>") == 3
    for name, token in [("image_token_index", "<image_soft_token>"), ("boi_token_index", "<start_of_image>"),
                        ("eoi_token_index", "<end_of_image>")]:
        assert getattr(cfg, name) == tok.convert_tokens_to_ids(token) < cfg.text_config.vocab_size
    gen = model.generation_config
    assert gen.eos_token_id == [1, tok.convert_tokens_to_ids("<end_of_turn>")]
    assert (gen.bos_token_id, gen.pad_token_id) == (2, 0)


def test_qwen_generation_config(loaded: dict) -> None:
    tok, model, _ = loaded["qwen3"]
    gen = model.generation_config
    assert gen.eos_token_id == [tok.convert_tokens_to_ids("<|im_end|>"), tok.convert_tokens_to_ids("<|endoftext|>")]
    assert gen.pad_token_id == tok.pad_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    assert tok.eos_token == "<|im_end|>" and tok.bos_token is None
    assert tok.padding_side == "right" and tok.model_max_length == 2048


# Where each architecture keeps its text decoder's layers (Gemma 3 is multimodal: a vision tower beside it).
DECODER_LAYERS_PATH = {"qwen3": "model.layers", "gemma3": "model.language_model.layers"}


@pytest.mark.parametrize("family", FAMILIES)
def test_decoder_layers_plain_and_peft(family: str, built: dict[str, Path]) -> None:
    from peft import LoraConfig, get_peft_model

    model = AutoModelForCausalLM.from_pretrained(built[family], local_files_only=True)
    layers = get_decoder_layers(model)
    assert isinstance(layers, torch.nn.ModuleList) and len(layers) == 4
    assert decoder_layers_path(model) == DECODER_LAYERS_PATH[family]
    assert operator.attrgetter(DECODER_LAYERS_PATH[family])(model) is layers

    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"]))
    peft_layers = get_decoder_layers(peft_model)
    assert peft_layers is layers and len(peft_layers) == 4
    assert operator.attrgetter("base_model.model." + DECODER_LAYERS_PATH[family])(peft_model) is layers


def test_a_model_without_decoder_layers_is_refused_naming_its_class() -> None:
    class NoLayers(torch.nn.Module):
        def get_decoder(self):
            return torch.nn.Linear(2, 2)

    with pytest.raises(UnsupportedLayoutError, match="decoder layers of NoLayers"):
        get_decoder_layers(NoLayers())


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_and_generate(family: str, loaded: dict) -> None:
    tok, model, _ = loaded[family]
    tok.padding_side = "left"  # decoder-only batched generation pads on the left
    try:
        batch = tok(["What is the capital of France?", "2 + 2 ="], return_tensors="pt", padding=True)
    finally:
        tok.padding_side = "right"
    with torch.no_grad():
        logits = model(**batch).logits
    assert logits.shape == (2, batch["input_ids"].shape[1], model.config.get_text_config().vocab_size)
    assert torch.isfinite(logits).all()
    out = model.generate(**batch, max_new_tokens=4, do_sample=False, min_new_tokens=4)
    assert out.shape == (2, batch["input_ids"].shape[1] + 4)


# --------------------------------------------------------------------------- chat templates


def test_qwen3_chat_template(loaded: dict) -> None:
    tok = loaded["qwen3"][0]
    user = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(user, tokenize=False) == "<|im_start|>user\nhi<|im_end|>\n"
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    prompt = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True) == prompt
    assert tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=True) == prompt
    assert tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True,
                                   enable_thinking=False) == prompt + "<think>\n\n</think>\n\n"
    history = user + [{"role": "assistant", "content": "hello"}, {"role": "user", "content": [
        {"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert tok.apply_chat_template(history, tokenize=False) == (
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n<|im_start|>user\nab<|im_end|>\n")


def test_gemma3_chat_template(loaded: dict) -> None:
    tok = loaded["gemma3"][0]
    user = [{"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(user, tokenize=False) == "<bos><start_of_turn>user\nhi<end_of_turn>\n"
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}]
    assert tok.apply_chat_template(conv, tokenize=False, add_generation_prompt=True) == (
        "<bos><start_of_turn>user\nBe brief.\n\nhi<end_of_turn>\n<start_of_turn>model\n")
    history = user + [{"role": "assistant", "content": "hello"},
                      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    assert tok.apply_chat_template(history, tokenize=False) == (
        "<bos><start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\nhello<end_of_turn>\n"
        "<start_of_turn>user\nab<end_of_turn>\n")
    # Tokenised chat: exactly one <bos> (the template's), not a second one from the post-processor.
    ids = _ids(tok.apply_chat_template(user, tokenize=True, add_generation_prompt=True))
    assert ids[0] == tok.bos_token_id and ids.count(tok.bos_token_id) == 1


# --------------------------------------------------------------------------- tokenizer


@pytest.mark.parametrize("family", FAMILIES)
def test_tokenizer_round_trip(family: str, loaded: dict) -> None:
    tok = loaded[family][0]
    texts = ["Hello, world! The capital of France is Paris.",
             '{"tool": "calculator", "args": {"expression": "3*(4+5)"}}',
             'get_weather(city="Paris", unit="celsius")', "[epistemic status: 85]", "Layer: 9", " ?",
             "Answer with 'Yes' or 'No' only.", "  spaces\tand\nnewlines ~`|^ 12345"]
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"]
        assert tok.decode(ids) == text
    # Learned merges: common corpus strings must not fall back to one token per byte.
    assert len(tok("The capital of France", add_special_tokens=False)["input_ids"]) < 8

    specials = (["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"] if family == "qwen3"
                else ["<pad>", "<eos>", "<bos>", "<unk>", "<start_of_turn>", "<end_of_turn>",
                      "<start_of_image>", "<end_of_image>", "<image_soft_token>"])
    for sp in specials:
        ids = tok(sp, add_special_tokens=False)["input_ids"]
        assert ids == [tok.convert_tokens_to_ids(sp)] and tok.decode(ids) == sp
    text = "x" + "y".join(specials) + " z"
    assert tok.decode(tok(text, add_special_tokens=False)["input_ids"]) == text


def test_tokenizer_bos_and_skip_special(loaded: dict) -> None:
    qwen, gemma = loaded["qwen3"][0], loaded["gemma3"][0]
    assert gemma("hi")["input_ids"][0] == gemma.bos_token_id  # Gemma adds <bos> by default
    assert gemma("hi", add_special_tokens=False)["input_ids"][0] != gemma.bos_token_id
    assert qwen("hi")["input_ids"] == qwen("hi", add_special_tokens=False)["input_ids"]  # Qwen adds nothing
    # As in real Qwen3, think tags are added but not special: they survive skip_special_tokens.
    ids = qwen("<think>\nx\n</think>\n\nok<|im_end|>", add_special_tokens=False)["input_ids"]
    assert qwen.decode(ids, skip_special_tokens=True) == "<think>\nx\n</think>\n\nok"


# --------------------------------------------------------------------------- in memory, any shape


@pytest.mark.parametrize("family", FAMILIES)
def test_in_memory_build_matches_the_saved_checkpoint(family: str, loaded: dict) -> None:
    model, tok = tiny_models.build_random_model(TinyModelSpec(family))
    state, saved = model.state_dict(), loaded[family][1].state_dict()
    assert state.keys() == saved.keys() and all(torch.equal(state[k], saved[k]) for k in saved)
    assert type(model).__name__ == EXPECTED_CLASS[family] and len(tok) <= TinyModelSpec(family).vocab_size
    # Caches keyed by the model's name (activations) never mistake it for a real checkpoint.
    assert model.config._name_or_path == f"{family}-{tiny_model_key(TinyModelSpec(family))}".replace(
        family, f"random-{family}", 1)


def test_in_memory_build_in_bf16_untied() -> None:
    model, _ = tiny_models.build_random_model(TinyModelSpec("qwen3", tie_word_embeddings=False),
                                              dtype=torch.bfloat16, attn_implementation="eager")
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert model.config._attn_implementation == "eager"
    assert model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr()


def test_full_size_shapes_have_the_real_parameter_counts() -> None:
    """The benchmark shapes, built on the meta device: Qwen3-8B's published count to the parameter, and Gemma 3
    27B's text stack (the real checkpoint adds a 0.4B SigLIP tower; ours is a token one)."""
    from bench.full_size import SHAPES

    qwen, _ = tiny_models.build_random_model(SHAPES["qwen3_8b"], dtype=torch.bfloat16, device="meta")
    assert sum(p.numel() for p in qwen.parameters()) == 8_190_735_360
    gemma, _ = tiny_models.build_random_model(SHAPES["gemma3_27b"], dtype=torch.bfloat16, device="meta")
    text = sum(p.numel() for n, p in gemma.named_parameters() if "vision" not in n and "multi_modal" not in n)
    assert 26.9e9 < text < 27.1e9
    assert type(gemma).__name__ == "Gemma3ForConditionalGeneration"


# --------------------------------------------------------------------------- cache behaviour


@pytest.mark.parametrize("family", FAMILIES)
def test_rebuild_is_bit_identical(family: str, built: dict[str, Path], tmp_path: Path) -> None:
    other = ensure_tiny_model(TinyModelSpec(family), tmp_path)
    assert other.name == built[family].name and other != built[family]
    a, b = load_file(built[family] / "model.safetensors"), load_file(other / "model.safetensors")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) and a[k].dtype == torch.float32 for k in a)
    assert (built[family] / "tokenizer.json").read_bytes() == (other / "tokenizer.json").read_bytes()


def test_different_seed_gives_different_weights(built: dict[str, Path], tmp_path: Path) -> None:
    other = ensure_tiny_model(TinyModelSpec("qwen3", seed=1), tmp_path)
    assert other.name != built["qwen3"].name
    a, b = load_file(built["qwen3"] / "model.safetensors"), load_file(other / "model.safetensors")
    assert not torch.equal(a["model.embed_tokens.weight"], b["model.embed_tokens.weight"])


def test_cache_reuse_does_not_rebuild(built: dict[str, Path], cache_dir: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    mtime = built["qwen3"].stat().st_mtime_ns

    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("cache hit expected, but ensure_tiny_model rebuilt")

    monkeypatch.setattr(tiny_models, "_build", no_build)
    assert ensure_tiny_model(TinyModelSpec("qwen3"), cache_dir) == built["qwen3"]
    assert ensure_tiny_model(TinyModelSpec("qwen3"), str(cache_dir)) == built["qwen3"]
    assert built["qwen3"].stat().st_mtime_ns == mtime


def test_partial_dirs_are_ignored(tmp_path: Path) -> None:
    spec = TinyModelSpec("gemma3")
    name = f"gemma3-{tiny_model_key(spec)}"
    # A crashed builder's temp dir, and a final-named dir without the completion marker.
    junk_tmp = tmp_path / f".tmp-{name}-crashed"
    junk_tmp.mkdir()
    (junk_tmp / "config.json").write_text("{not json")
    half = tmp_path / name
    half.mkdir()
    (half / "config.json").write_text("{not json")

    path = ensure_tiny_model(spec, tmp_path)
    assert path == half and (path / "model.safetensors").is_file()
    assert type(AutoModelForCausalLM.from_pretrained(path, local_files_only=True)).__name__ == EXPECTED_CLASS["gemma3"]
    assert junk_tmp.exists()  # fresh temp dirs may belong to a live builder: left alone
    assert not list(tmp_path.glob(".stale-*"))


def test_concurrent_builder_wins(built: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """If another process publishes first, ours is discarded and theirs is returned."""
    real_build = tiny_models._build
    final = tmp_path / built["qwen3"].name

    def build_then_lose_race(spec: TinyModelSpec, texts: list[str], out: Path) -> None:
        real_build(spec, texts, out)
        shutil.copytree(built["qwen3"], final)  # the other builder's rename lands first
        (final / "winner").write_text("other process")

    monkeypatch.setattr(tiny_models, "_build", build_then_lose_race)
    assert ensure_tiny_model(TinyModelSpec("qwen3"), tmp_path) == final
    assert (final / "winner").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [final.name]  # our temp copy is gone


def test_unknown_family_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="family"):
        ensure_tiny_model(TinyModelSpec("llama"), tmp_path)


def test_corpus_is_deterministic_and_covers_task_strings() -> None:
    texts = corpus_texts()
    assert texts == corpus_texts() and len(texts) >= 300
    joined = "\n".join(texts)
    for needle in ['{"tool": "calculator", "args": {"expression": ', '{"final": "', 'get_weather(city="',
                   "Layer: ", "[epistemic status: ", " ?", "Answer with 'Yes' or 'No' only."]:
        assert needle in joined, needle
