"""The README's "Write a reward" example, verbatim: importing the module registers the reward."""
from jointrl.envs.episode import Episode
from jointrl.rewards.registry import register

@register("short_answer")
def short_answer(episode: Episode, max_chars: int = 20) -> float | None:
    """1.0 when the final answer has at most max_chars characters.

    >>> short_answer(Episode("toy/word-length-v0:easy", "toy", "word-length", "easy", 0, "low", final_answer="5"))
    1.0
    """
    return None if episode.final_answer is None else float(len(episode.final_answer) <= max_chars)
