"""How a model judges in the demo: the item's truth, read with the model's strength and lean.

An answer writer's draw from the prompt's seed is the item's *truth*: what a perfect judge of the
fake's world would answer (the writers' answer when no model is named, :data:`TRUTH`). A named
model answers through its :class:`Persona`, so that two models disagree as real judges do while
each one's answers stay reproducible (the same model, prompt, temperature and draw give the same
answer):

* **Strength** is :func:`judge_engine.fake.logprobs.strength` (``mini``, ``haiku``, ``flash``...
  weak; ``gpt-4``, ``sonnet``, ``pro``... strong; the rest mid), the one the log-prob judge uses.
  It sets the model's noise: half the log-prob judge's logit noise, read in steps of a scale
  (weak 0.9, mid 0.5, strong 0.35), and how often it misses, invents or misreads something
  (:meth:`Persona.chance`: x1.8, x1, x0.7 a mid model's rate). A strong model is closer to the
  truth, a weak one noisier.
* **Lean**, in [-1, 1] from a hash of the name: a lenient judge (> 0) scores up to
  :data:`LEAN_STEPS` of a step higher, misses more errors and invents fewer; a harsh one the
  reverse. For a generator (CDAT, DAT) the lean is how associative its word lists are.

The draws are the model's own, per prompt (a judge is consistently wrong about the same items),
and apart from the truth's: the truth of an item does not move when a model is added.
Log-prob requests and ``pairwise-annotators`` are answered from the truth and judged by
:func:`judge_engine.fake.logprobs.judge` (its own per-model noise), as before personas existed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from judge_engine.fake.logprobs import SIGMA, strength
from judge_engine.protocols.base import stable_seed

TRUTH = ""
"""The model name of the truth itself: no noise, no lean (the writers' answer as it always was)."""
LEAN_STEPS = 0.5
"""How far, in steps of a scale, a fully lenient (or harsh) judge moves a score on average."""
_MID = SIGMA["mid"]


@dataclass(frozen=True, slots=True)
class Persona:
    """One model as a judge (see the module docstring)."""

    name: str
    """The model's name, lower case, without its provider prefix (``gpt-4o-mini``)."""
    noise: float
    """The standard deviation of its reading of a score, in steps of the scale (0: the truth)."""
    lean: float
    """-1 (harsh) to 1 (lenient); 0 for the truth."""

    @property
    def is_truth(self) -> bool:
        return self.noise == 0 and self.lean == 0

    def rng(self, seed: int, what: str) -> random.Random:
        """This model's own draws for ``what`` on the prompt with ``seed``."""
        return random.Random(f"{seed}:{self.name}:{what}")

    def sampling(self, seed: int, temperature: float) -> random.Random:
        """The sampling noise of a request at ``temperature`` (the truth's is the writers' own
        ``seed:temperature`` draw; a model samples apart from the others)."""
        suffix = f":{self.name}" if not self.is_truth else ""
        return random.Random(f"{seed}:{temperature}{suffix}")

    def shift(self, rng: random.Random, scale: float = 1.0) -> float:
        """How far this model reads a score off its truth, in steps: its lean plus its noise."""
        if self.is_truth:
            return 0.0
        return LEAN_STEPS * self.lean + scale * self.noise * rng.gauss(0, 1)

    def steps(self, rng: random.Random, scale: float = 1.0) -> int:
        """:meth:`shift` rounded to whole steps of an integer scale."""
        return round(self.shift(rng, scale))

    def chance(self, rate: float, *, lenient: float = 0.0) -> float:
        """How often this model makes a slip a mid model makes at ``rate``: scaled by its
        strength, and by ``1 + lenient * lean`` (a positive ``lenient``: a slip a lenient judge
        makes more often, such as missing an error). 0 for the truth."""
        if self.is_truth:
            return 0.0
        return min(1.0, max(0.0, rate * (2 * self.noise / _MID) * (1 + lenient * self.lean)))


@cache
def persona(model: str) -> Persona:
    """The persona of ``model`` (a provider prefix such as ``openai/`` is ignored, as is case)."""
    name = model.rsplit("/", 1)[-1].strip().lower()
    if not name:
        return Persona(TRUTH, 0.0, 0.0)
    lean = random.Random(stable_seed("fake-persona-lean", name)).uniform(-1.0, 1.0)
    return Persona(name, SIGMA[strength(name)] / 2, lean)
