"""``python -m ao_calib.export``: the adapter, or the merged model, with tokenizer, chat template and model card,
loads with the standard classes and gives the same outputs as the run's own base model + adapter."""

from __future__ import annotations

import json

import pytest
import torch
from omegaconf import OmegaConf

from ao_calib.config.compose import compose_run_config
from ao_calib.export import main
from ao_calib.models import loading as models
from ao_calib.runs.run_dir import RunDir


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished run's files (config, adapter, tokenizer, eval.json) with a LoRA that changes the outputs."""
    path = tmp_path_factory.mktemp("run")
    cfg = compose_run_config(["experiment=function_call_tiny"])
    OmegaConf.save(cfg, path / RunDir.CONFIG)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.attach_lora(models.load_base_model(cfg.model, source), cfg.model, cfg.trainer.lora)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if "lora_B" in name:  # peft starts B at zero, which would make the adapter a no-op
                param.normal_(0, 0.5)
    run = RunDir(path)
    model.save_pretrained(str(run.adapter))
    models.load_tokenizer(source).save_pretrained(str(run.adapter))
    run.eval_report().write_text(json.dumps({"num_samples": 8, "headline_metric": "tool_call_exact",
                                             "metrics": {"tool_call_exact": 0.25, "accuracy": 0.25}}))
    return path


def _logits(model, tokenizer):
    messages = [{"role": "user", "content": "What is Fibonacci number 7?"}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        return model(input_ids=ids["input_ids"]).logits


def _reference(run_dir):
    from ao_calib.config.compose import load_run_config

    cfg = load_run_config(RunDir(run_dir).config)
    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    model = models.load_trained_model(cfg.model, source, RunDir(run_dir).adapter).eval()
    base = models.load_base_model(cfg.model, source).eval()
    return model, base, models.load_tokenizer(source)


@pytest.mark.parametrize("merge", [False, True])
def test_export_round_trips(run_dir, tmp_path, merge):
    from peft import AutoPeftModelForCausalLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path / "export"
    assert main([f"run_dir={run_dir}", f"out={out}", f"merge={str(merge).lower()}"]) == 0
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.chat_template and (out / "chat_template.jinja").is_file()
    loaded = (AutoModelForCausalLM if merge else AutoPeftModelForCausalLM).from_pretrained(out).eval()
    assert not (out / "adapter_config.json").exists() if merge else (out / "adapter_config.json").exists()
    reference, base, ref_tokenizer = _reference(run_dir)
    expected = _logits(reference, ref_tokenizer)
    assert not torch.allclose(expected, _logits(base, ref_tokenizer), atol=1e-3)  # the adapter matters
    torch.testing.assert_close(_logits(loaded, tokenizer), expected, atol=1e-4, rtol=1e-4)
    card = (out / "README.md").read_text()
    assert "| tool_call_exact | 0.2500 |" in card and "task `function_call`" in card
    assert "generate:" in card.split("## Held-out")[0]  # the data settings
    assert "max_steps: 3" in card.split("## Training config")[1]  # the full config
    assert ("AutoModelForCausalLM.from_pretrained" if merge else "AutoPeftModelForCausalLM") in card


def test_refuses_missing_adapter_and_non_empty_out(run_dir, tmp_path, capsys):
    assert main([f"run_dir={tmp_path}"]) == 2
    assert "not a run directory" in capsys.readouterr().err
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert main([f"run_dir={run_dir}", f"out={tmp_path / 'full'}"]) == 2
    assert "not empty" in capsys.readouterr().err


def test_push_to_hub_refuses_offline_or_without_token_before_exporting(run_dir, tmp_path, capsys, monkeypatch):
    out = tmp_path / "export"
    args = [f"run_dir={run_dir}", f"out={out}", "push_to_hub=me/tiny-fc"]
    for variable in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert main(args) == 2
    assert "HF_HUB_OFFLINE is set" in capsys.readouterr().err
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.delenv("HF_TOKEN")
    assert main(args) == 2
    assert "no hub token in the environment; set HF_TOKEN" in capsys.readouterr().err
    monkeypatch.setenv("HF_TOKEN", "hf_x")
    assert main([*args[:2], "push_to_hub=no-owner"]) == 2
    assert "not a hub repository id" in capsys.readouterr().err
    assert not out.exists()  # refused before any export work


class _Hub:
    """The hub endpoints an upload of small files uses, on 127.0.0.1: create the repository, validate the model
    card's metadata, ask how to upload each file (all inline, "regular"), and the commit with the files' contents
    (NDJSON)."""

    def __init__(self):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        hub = self
        self.repos, self.files, self.cards, self.auth = [], {}, [], set()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _reply(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                import base64

                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                hub.auth.add(self.headers.get("Authorization"))
                if self.path == "/api/repos/create":
                    request = json.loads(body)
                    hub.repos.append(request)
                    return self._reply({"url": f"{hub.url}/{request.get('organization')}/{request['name']}"})
                if self.path == "/api/validate-yaml":  # the model card's front matter
                    hub.cards.append(json.loads(body)["content"])
                    return self._reply({})
                if "/preupload/" in self.path:
                    return self._reply({"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False}
                                                  for f in json.loads(body)["files"]]})
                if "/commit/" in self.path:
                    for line in body.decode().splitlines():
                        item = json.loads(line)
                        if item["key"] == "file":
                            hub.files[item["value"]["path"]] = base64.b64decode(item["value"]["content"])
                    return self._reply({"commitUrl": f"{hub.url}/me/tiny-fc/commit/abc", "commitOid": "a" * 40})
                self.send_response(404)
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_push_to_hub_uploads_the_export_to_the_hub(run_dir, tmp_path, monkeypatch, capsys):
    hub = _Hub()
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        monkeypatch.setenv("HF_HUB_OFFLINE", "0")
        # huggingface_hub read the test session's HF_HUB_OFFLINE=1 at import; a fresh CLI process reads the 0
        monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", False)
        monkeypatch.setenv("HF_TOKEN", "hf_loopback")
        out = tmp_path / "export"
        assert main([f"run_dir={run_dir}", f"out={out}", "push_to_hub=me/tiny-fc"]) == 0, capsys.readouterr().err
    finally:
        hub.server.shutdown()
    assert [(r["organization"], r["name"], r["visibility"]) for r in hub.repos] == [("me", "tiny-fc", "private")]
    assert hub.auth == {"Bearer hf_loopback"}
    local = {p.relative_to(out).as_posix(): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert hub.files == local and "adapter_model.safetensors" in local and "README.md" in local
    assert hub.cards and hub.cards[0].startswith("---\nbase_model:")
    assert "uploaded" in capsys.readouterr().out
