"""An evaluation's episodes keep each row's keys and values between turns (``eval.turn_cache_mb``): a turn prefills
only what came since the row's last one, and decodes what a whole prefill decodes."""

from __future__ import annotations

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from ao_calib.evaluation.generation import generate_completions
from ao_calib.evaluation.turn_cache import TurnCache, _Entry
from ao_calib.models.tiny.builder import TinyModelSpec, ensure_tiny_model

SYSTEM = ("You can call these functions. ls(): the files of the current folder. cd(folder: str): go into a folder. "
          "cat(file: str): a file's text. wc(file: str, mode: str): lines, words or characters of a file. ") * 3
ASKS = ("Go into 'orchard'.", "How many lines does 'memo.txt' have? Then multiply it by 3.", "ls", "Multiply 3 by 4.")
KWARGS = {"chat_template_kwargs": {"enable_thinking": False}, "max_new_tokens": 12, "batch_size": 4}


def _model(offline_env):
    path = ensure_tiny_model(TinyModelSpec(family="qwen3"), offline_env / "tiny_models")
    torch.manual_seed(0)
    return AutoTokenizer.from_pretrained(path), AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()


def _turns(model, tokenizer, turn_cache, widths):
    """Three turns of four episodes: each turn appends the model's message and a tool result to its row."""
    rows = [{"prompt": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ask}]} for ask in ASKS]
    said = []
    hook = model.register_forward_pre_hook(lambda _m, _a, kw: widths.append(kw["input_ids"].shape[1]),
                                           with_kwargs=True)
    try:
        for turn in range(3):
            widths.append(None)  # a turn starts
            texts = generate_completions(model, tokenizer, rows, turn_cache=turn_cache, **KWARGS)
            said.append(texts)
            rows = [{"prompt": row["prompt"] + [{"role": "assistant", "content": text},
                                                {"role": "tool", "content": f"result {turn} of row {i}"}]}
                    for i, (row, text) in enumerate(zip(rows, texts, strict=True))]
    finally:
        hook.remove()
    return said


def _first_pass_of_each_turn(widths):
    return [widths[i + 1] for i, w in enumerate(widths) if w is None]


def test_later_turns_prefill_only_what_came_since_and_decode_the_same(offline_env):
    tokenizer, model = _model(offline_env)
    whole, reused = [], []
    expected = _turns(model, tokenizer, None, whole)
    cache = TurnCache(2**30)
    got = _turns(model, tokenizer, cache, reused)
    assert got == expected
    plain, cached = _first_pass_of_each_turn(whole), _first_pass_of_each_turn(reused)
    assert cached[0] == plain[0]  # the first turn has nothing kept: the shared system turn once, as before
    for later_plain, later_cached in zip(plain[1:], cached[1:], strict=True):
        assert later_cached < later_plain / 3  # the message, the tool result and the next turn's start alone
    assert len(cache.entries) == len(ASKS) and cache.nbytes > 0


def test_a_budget_too_small_for_a_row_keeps_nothing_and_changes_nothing(offline_env):
    tokenizer, model = _model(offline_env)
    expected = _turns(model, tokenizer, None, [])
    cache = TurnCache(1024)
    assert _turns(model, tokenizer, cache, []) == expected
    assert cache.entries == []


def _entry(ids, size=4):
    tensor = torch.zeros(1, len(ids), size)
    return _Entry(torch.tensor(ids), [tensor], [tensor.clone()])


def test_a_row_takes_the_entry_it_shares_most_with_and_keeps_a_token_of_its_own():
    cache = TurnCache(2**20)
    short, long = _entry([1, 2, 3]), _entry([1, 2, 3, 4, 5, 6])
    cache.keep(short)
    cache.keep(long)
    assert cache.take([1, 2, 3, 4, 5, 6]) == (long, 5)  # the last token is prefilled again: its logits
    assert cache.take([9, 2, 3]) == (None, 0)
    assert cache.take([1, 2, 7, 7]) == (short, 2)
    assert cache.entries == []


def test_the_oldest_entries_go_first_when_the_budget_is_spent():
    first, second, third = _entry([1, 1]), _entry([2, 2]), _entry([3, 3])
    cache = TurnCache(first.nbytes * 2)
    for entry in (first, second, third):
        cache.keep(entry)
    assert cache.entries == [second, third]
