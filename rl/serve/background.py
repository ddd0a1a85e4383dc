"""A server on a thread of this process: for black-box agent rollouts, tests and benchmarks."""
from __future__ import annotations

import socket
import threading
import time

import uvicorn
from fastapi import FastAPI


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now."""
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BackgroundServer:
    """Serve an app on host:port from a daemon thread; `with` waits until it listens and stops it after."""

    def __init__(self, app: FastAPI, host: str = "127.0.0.1", port: int | None = None, start_timeout_s: float = 30.0):
        self.host, self.port = host, port or free_port(host)
        self.start_timeout_s = start_timeout_s
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="http", daemon=True)

    @property
    def url(self) -> str:
        """The base URL, e.g. http://127.0.0.1:8000 (clients add /v1)."""
        return f"http://{self.host}:{self.port}"

    def __enter__(self) -> "BackgroundServer":
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {self.url} did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
