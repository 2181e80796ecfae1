"""``python -m ao_calib.export run_dir=PATH [merge=true] [out=DIR]``: take a finished run's model away.

Writes the run's LoRA adapter (loadable with ``peft.AutoPeftModelForCausalLM``), or with ``merge=true`` the base
model with the adapter merged in (loadable with ``transformers.AutoModelForCausalLM``, no peft needed), together
with the tokenizer and its chat template, and a model card (``README.md``) giving the base model, the run's full
config, its data settings and its held-out numbers (``eval.json``). ``out`` defaults to ``RUN/export`` or
``RUN/export-merged``; an existing non-empty ``out`` is refused. ``push_to_hub=OWNER/NAME`` then uploads that
folder to a Hugging Face model repository (created when missing, private unless ``private=false``), with the token
from the environment (``HF_TOKEN``); offline (``HF_HUB_OFFLINE=1``) or without a token it is refused before
anything is exported.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from ao_calib.core.command_options import Command
from ao_calib.core.errors import AOCalibError
from ao_calib.core.settings import Checked, setting
from ao_calib.runs.run_dir import RunDir, read_json
from ao_calib.runtime.offline import env_flag

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors", "adapter_model.bin")


@dataclass
class ExportArgs(Checked):
    run_dir: str = setting(help="The finished run to export.")
    merge: bool = setting(False, "Merge the adapter into the base model (loadable without peft).")
    out: Optional[str] = setting(None, "The output folder, refused when it exists and is not empty; null: "
                                 "RUN/export (RUN/export-merged with merge=true).")
    push_to_hub: Optional[str] = setting(None, "Also upload the export to this hub model repository (OWNER/NAME; "
                                         "the token from HF_TOKEN); null: no upload.")
    private: bool = setting(True, "Create the hub repository private (with push_to_hub).")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out is not None and Path(self.out).exists() and not Path(self.out).is_dir():
            raise AOCalibError(f"out={self.out} is a file: name a folder to export into")
        if self.push_to_hub is not None:
            check_repo_id(self.push_to_hub)


COMMAND = Command(
    "ao_calib.export", ExportArgs, "run_dir=PATH [merge=true] [out=DIR] [push_to_hub=OWNER/NAME]",
    (__doc__ or "").split("\n\n")[1].replace("\n", " ").replace("``", "`"),
    examples=("run_dir=outputs/runs/function_call/2026-11-22/10-00-00 merge=true",))


def parse_args(argv: list[str]) -> ExportArgs:
    return COMMAND.parse(argv)[0]


def export(args: ExportArgs) -> Path:
    """Writes the export and returns its folder. Checks everything it can before loading a model."""
    from ao_calib.config.compose import load_run_config

    token = hub_token(args.push_to_hub) if args.push_to_hub else None
    run_dir = RunDir(args.run_dir)
    if not run_dir.config.exists():
        raise AOCalibError(f"run_dir={run_dir}: not a run directory ({run_dir.config} is missing)")
    adapter = run_dir.adapter
    if not (adapter / "adapter_config.json").is_file():
        raise AOCalibError(f"run_dir={run_dir}: no adapter at {adapter} (did the run finish?)")
    out = Path(args.out) if args.out else run_dir.path / ("export-merged" if args.merge else "export")
    if out.exists() and any(out.iterdir()):
        raise AOCalibError(f"out={out} exists and is not empty; choose another out=")
    cfg = load_run_config(run_dir.config)
    from ao_calib.models import loading as models

    source = models.model_source(cfg.model, cfg.paths.cache_dir)
    tokenizer = models.load_tokenizer(str(adapter) if (adapter / "tokenizer_config.json").is_file() else source,
                                      cfg.model)
    out.mkdir(parents=True, exist_ok=True)
    if args.merge:
        model = models.load_trained_model(cfg.model, source, adapter).merge_and_unload()
        model.save_pretrained(str(out))
    else:
        for name in ADAPTER_FILES:
            if (adapter / name).is_file():
                shutil.copy2(adapter / name, out / name)
    tokenizer.save_pretrained(str(out))  # tokenizer files and chat_template.jinja
    (out / "README.md").write_text(model_card(cfg, run_dir, source, args.merge), encoding="utf-8")
    if args.push_to_hub:
        push(out, args.push_to_hub, token, args.private)
    return out


TOKEN_VARIABLES = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def hub_token(repo_id: str) -> str:
    """The token for ``push_to_hub``, from the environment only (never a stored login, never written anywhere);
    refuses offline mode, a missing token and a malformed repository id before any export work."""
    if env_flag("HF_HUB_OFFLINE"):
        raise AOCalibError(f"push_to_hub={repo_id}: HF_HUB_OFFLINE is set, so the hub cannot be reached; unset it "
                           "(or export without push_to_hub and upload the folder later)")
    token = next((os.environ[v] for v in TOKEN_VARIABLES if os.environ.get(v, "").strip()), None)
    if token is None:
        raise AOCalibError(f"push_to_hub={repo_id}: no hub token in the environment; set HF_TOKEN to a token "
                           "with write access")
    check_repo_id(repo_id)
    return token.strip()


def check_repo_id(repo_id: str) -> None:
    """Refuses a ``push_to_hub`` value that is not a hub repository id (OWNER/NAME)."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        if "/" not in repo_id:
            raise HFValidationError("expected OWNER/NAME")
        validate_repo_id(repo_id)
    except HFValidationError as exc:
        raise AOCalibError(f"push_to_hub={repo_id}: not a hub repository id ({exc})") from None


def push(folder: Path, repo_id: str, token: str, private: bool) -> str:
    """Creates the model repository if needed and uploads the folder in one commit; returns the commit's URL."""
    import httpx
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=token)  # HF_ENDPOINT: another hub
    try:
        api.create_repo(repo_id, repo_type="model", private=private, exist_ok=True)
        commit = api.upload_folder(repo_id=repo_id, repo_type="model", folder_path=str(folder),
                                   commit_message=f"ao_calib export of {folder.parent.name}")
    except HfHubHTTPError as exc:
        raise AOCalibError(f"push_to_hub={repo_id}: the hub refused the upload ({str(exc).splitlines()[0]}); "
                           f"the export is kept in {folder}") from None
    except (httpx.TransportError, OSError) as exc:  # no route to the hub, DNS, TLS, a timeout
        raise AOCalibError(f"push_to_hub={repo_id}: the hub cannot be reached ({exc}); the export is kept in "
                           f"{folder}") from None
    print(f"uploaded {folder} to {commit.commit_url}")
    return commit.commit_url


def model_card(cfg, run_dir: RunDir, base: str, merged: bool) -> str:
    """The model card: what the model is, how to load it, the run's data, held-out numbers and full config."""
    evaluation = read_json(run_dir.eval_report()) or {}
    metrics = evaluation.get("metrics") or {}
    name = cfg.get("run_name") or cfg.task.name
    load = ("from transformers import AutoModelForCausalLM, AutoTokenizer\n"
            "model = AutoModelForCausalLM.from_pretrained(PATH)\n" if merged else
            "from peft import AutoPeftModelForCausalLM\nfrom transformers import AutoTokenizer\n"
            "model = AutoPeftModelForCausalLM.from_pretrained(PATH)  # loads the base model, then this adapter\n")
    lines = [
        "---", f"base_model: {base}", "library_name: " + ("transformers" if merged else "peft"),
        "tags: [ao_calib, " + ", ".join([str(cfg.task.name), str(cfg.trainer.name)]) + "]", "---", "",
        f"# {name}", "",
        f"{'The base model with a LoRA adapter merged in' if merged else 'A LoRA adapter'} trained with ao_calib: "
        f"task `{cfg.task.name}`, trainer `{cfg.trainer.name}`, reward `{cfg.reward.name}`, base model `{base}`.",
        "", "## Load it", "", "```python", load + "tokenizer = AutoTokenizer.from_pretrained(PATH)", "```", "",
        "The tokenizer carries the chat template the model was trained with; build prompts with "
        "`tokenizer.apply_chat_template(messages, add_generation_prompt=True)`"
        + (" and the run's template options " + json.dumps(OmegaConf.to_container(cfg.model.chat_template_kwargs))
           if cfg.model.get("chat_template_kwargs") else "") + ".",
        "", "## Data", "", "```yaml", OmegaConf.to_yaml(cfg.task.get("data") or {}).strip() or "{}", "```", "",
        "## Held-out evaluation", "",
    ]
    if metrics:
        lines += [f"{evaluation.get('num_samples', '?')} held-out samples, {evaluation.get('decoding', 'greedy')}; "
                  f"headline metric `{evaluation.get('headline_metric', 'accuracy')}`.", "",
                  "| metric | value |", "|---|---:|"]
        lines += [f"| {k} | {v:.4f} |" for k, v in sorted(metrics.items()) if isinstance(v, (int, float))]
    else:
        lines.append("The run wrote no held-out evaluation (eval.json).")
    lines += ["", "## Training config", "", f"From `{run_dir.path}`:", "", "```yaml",
              OmegaConf.to_yaml(cfg, resolve=False).strip(), "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return COMMAND.main(argv, _export_and_say)


def _export_and_say(args: ExportArgs, _: list[str]) -> None:
    out = export(args)
    print(f"exported to {out} (model card: {out / 'README.md'})")


if __name__ == "__main__":
    sys.exit(main())
