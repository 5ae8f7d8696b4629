"""What 'best' means (plan.objective): the Objective enum, with the value of a measurement under it, which of two
values is better, how its numbers are labelled, and the sort key of a ranking.

- tokens_per_s: the fastest (the choice at a fixed node count);
- tokens_per_s_per_gpu: the most efficient per GPU (what a per-GPU-hour budget buys);
- time_to_target: the fastest wall-clock to plan.target_tokens, which ranks exactly like tokens_per_s (the time is
  target / tokens_per_s); the plan also prints the wall-clock and the GPU-hours it takes.

Higher scores are better for every objective: score() is a throughput (per GPU for the per-GPU objective).
"""

from __future__ import annotations

from launcher.core.names import StrEnum


class Objective(StrEnum):
    tokens_per_s = "tokens_per_s"
    tokens_per_s_per_gpu = "tokens_per_s_per_gpu"
    time_to_target = "time_to_target"

    @property
    def per_gpu(self) -> bool:
        """Does it compare throughput per GPU (a trial on more GPUs must do proportionally more)?"""
        return self is Objective.tokens_per_s_per_gpu

    @property
    def needs_target(self) -> bool:
        """Does it need plan.target_tokens?"""
        return self is Objective.time_to_target

    def score(self, tokens_per_s: float, gpus: int) -> float:
        """The objective's value of a throughput measured or predicted on `gpus` GPUs; higher is better."""
        return tokens_per_s / max(1, gpus) if self.per_gpu else tokens_per_s

    def share(self, gpus: int) -> float:
        """What one token/s of a trial on `gpus` GPUs is worth under this objective (score(1, gpus))."""
        return self.score(1.0, gpus)

    def better(self, a: float, b: float) -> bool:
        """Is objective value `a` better than `b`?"""
        return a > b

    def rank_key(self, tokens_per_s: float, gpus: int, headroom: float) -> tuple[float, float]:
        """Sort key, best first: the objective's value, then memory headroom."""
        return (-self.score(tokens_per_s, gpus), -headroom)

    def comparable(self, tokens_per_s: float, gpus: int, other_gpus: int) -> float:
        """A throughput measured on `gpus` GPUs, in the terms of a trial on `other_gpus` (per-GPU objectives
        compare per GPU, so it scales with the GPU count)."""
        return tokens_per_s / max(1, gpus) * max(1, other_gpus) if self.per_gpu else tokens_per_s

    @property
    def label(self) -> str:
        """How people read it: column headers, explanations."""
        return _LABELS[self][0]

    @property
    def unit(self) -> str:
        return _LABELS[self][1]

    @property
    def superlative(self) -> str:
        """'faster' / 'more efficient per GPU': how a winner compares with the next best."""
        return "more efficient per GPU" if self.per_gpu else "faster"


_LABELS = {Objective.tokens_per_s: ("throughput", "tokens/s"),
           Objective.tokens_per_s_per_gpu: ("throughput per GPU", "tokens/s per GPU"),
           Objective.time_to_target: ("time to the target tokens", "tokens/s")}

OBJECTIVES: tuple[str, ...] = tuple(o.value for o in Objective)
