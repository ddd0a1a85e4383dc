"""The env that poses one reasoning-gym entry as a single-turn task and scores the answer with the dataset's verifier."""
from __future__ import annotations

from typing import Any, Iterator

from jointrl.envs.base import Action, Env
from jointrl.envs.reasoning import balance, entries

SYSTEM_PROMPT = (
    "Solve the task in the user's message. Think it through first; then reply with only the final answer as "
    "your message content, in the format the task asks for, without explanation."
)


class ReasoningGymEnv(Env):
    """A reasoning-gym dataset as an env: no tools, one answer, `success` = 1.0 iff the verifier gives it full marks.

    Signals: `score` is the verifier's raw score in [0, 1] (some verifiers give partial credit, e.g. 0.01 for
    any parseable answer); `success` is 1.0 exactly when `score` reaches 1.0; `verifier_error` is 1.0 when
    the verifier raised on the answer (which then scores 0). A missing or blank answer scores 0 without
    asking the verifier, since several give a token 0.01-0.05 even to an empty string. Where reasoning-gym's
    verifier accepts shortcuts, verifiers.py scores instead; where a constant answer would often be right,
    balance.py chooses each seed's entry so that it is not (and an explicit k-way choice says so in
    `answer_choices`).
    """

    def __init__(self, difficulty: str = "default", dataset: str = "", config: dict[str, Any] | None = None):
        config = dict(config or {})
        entries.check(dataset, config)
        super().__init__(difficulty=difficulty, dataset=dataset, config=config)
        self.dataset = dataset
        self.config = config
        self.answer_choices = balance.answer_choices(dataset)
        self._draw: entries.Draw | None = None

    def _reset(self, seed: int) -> list[dict]:
        self._draw = entries.draw(self.dataset, self.config, seed)
        return [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": self._draw.entry["question"]},
        ]

    def _signals(self) -> dict[str, float]:
        if self._draw is None:
            raise RuntimeError(f"reasoning env {self.dataset!r}: call reset(seed) before signals()")
        if not self.final_answer or not self.final_answer.strip():
            return {"success": 0.0, "score": 0.0, "verifier_error": 0.0}
        try:
            score = entries.score(self._draw.dataset, self.final_answer, self._draw.entry)
        except Exception:  # a verifier tripping over model text is that answer's failure, not the episode's
            return {"success": 0.0, "score": 0.0, "verifier_error": 1.0}
        return {"success": float(score >= 1.0), "score": score, "verifier_error": 0.0}

    def _solution(self) -> Iterator[Action]:
        if self._draw is None:
            raise RuntimeError(f"reasoning env {self.dataset!r}: call reset(seed) before demo()")
        yield Action(name=None, answer=self._draw.reference, reasoning="The answer follows from the puzzle.")
