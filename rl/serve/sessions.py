"""Black-box episodes: an external agent program talks to the server with an API key that names its episode, and
the server records exactly what the model was fed and sampled for the learner.

A recorded episode is a list of segments. A segment is one engine sequence: the first request's prompt, the
turn sampled, then every later request that extends the conversation in the same row (prefix reuse) adds the
tokens fed for its new messages and the turn sampled after them. The tokens are the ones the model saw, never a
re-rendering, so the learner recomputes exactly the behaviour log-probs. When the agent edits or drops history
(its next request does not extend what the row holds), a new segment starts from that request's full prompt;
the episode's reward then applies to every segment.
"""
from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field

from jointrl.rl.trajectory import TokenLog

KEY_PREFIX = "ep-"


@dataclass
class EpisodeLog:
    """Every segment one episode's requests produced, in order."""

    segments: list[TokenLog] = field(default_factory=list)  # one per engine sequence
    requests: int = 0
    open: bool = True


class Sessions:
    """API keys of live black-box episodes and their logs; shared by the web side and the engine thread."""

    def __init__(self):
        self._logs: dict[str, EpisodeLog] = {}
        self._lock = threading.Lock()

    def open(self) -> str:
        """A fresh API key whose requests are recorded."""
        key = KEY_PREFIX + secrets.token_hex(16)
        with self._lock:
            self._logs[key] = EpisodeLog()
        return key

    def known(self, key: str) -> bool:
        """Whether requests with this key may run (an open episode)."""
        with self._lock:
            return key in self._logs and self._logs[key].open

    def log(self, key: str) -> EpisodeLog:
        """The live log of an episode (the engine thread appends to it)."""
        with self._lock:
            return self._logs[key]

    def close(self, key: str) -> EpisodeLog:
        """End an episode: later requests with its key are refused; returns what it recorded."""
        with self._lock:
            log = self._logs.pop(key)
        log.open = False
        return log
