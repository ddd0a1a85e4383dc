"""The sandbox for model-written commands: types, process control, host-side paths, confinement backends, shell session.

`Sandbox` (box.py) is what envs use; `BashSession` (session.py) is its persistent shell; `PYTHON` (runtime.py)
is the interpreter sandboxed programs run, with the tasks' packages and without jointrl.
"""
from jointrl.envs.sandbox.box import Sandbox, fresh_sandbox_from, sandbox_backend, sweep_orphans
from jointrl.envs.sandbox.runtime import PYTHON
from jointrl.envs.sandbox.session import BashSession
from jointrl.envs.sandbox.types import Limits, RunResult, SandboxUnavailable

__all__ = [
    "PYTHON", "BashSession", "Limits", "RunResult", "Sandbox", "SandboxUnavailable", "fresh_sandbox_from", "sandbox_backend",
    "sweep_orphans",
]
