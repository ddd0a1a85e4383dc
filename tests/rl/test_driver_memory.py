"""The driver's memory does not grow with the model: `train` with a 50M and a 200M parameter policy.

Each run is a fresh driver process (tests/rl/driver_memory.py) on the ep2_cpu layout: two learner ranks splitting
the experts, two rollout workers, two RL steps and a checkpoint. The ranks read the checkpoint, publish their own
shares of the weights to the workers and write the checkpoint themselves, so the 150M extra parameters (600 MB
in fp32) never pass through the driver: its peak memory during `train` may differ between the two runs by
noise only. Gathering the policy into the driver once per step, as the loop did before, costs at least one
fp32 copy of it there.
"""
import json
import os
import subprocess
import sys

import pytest

MIB = 1024**2
SMALL, LARGE = 40, 168  # routed experts per MoE layer: about 50M and 200M parameters


def child(*args) -> dict:
    env = {**os.environ, "WANDB_MODE": "disabled", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-m", "tests.rl.driver_memory", *map(str, args)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.timeout(2400)
def test_the_driver_memory_does_not_grow_with_the_number_of_parameters(tmp_path):
    runs = {}
    for experts in (SMALL, LARGE):
        init = tmp_path / f"init-{experts}"
        parameters = child("init", init, experts)["parameters"]
        runs[experts] = parameters, child("train", init, experts, tmp_path / f"run-{experts}")
    (small_params, small), (large_params, large) = runs[SMALL], runs[LARGE]
    assert 45e6 < small_params < 55e6 and 190e6 < large_params < 210e6
    for run in (small, large):
        assert run["steps"] == 2 and os.path.isfile(os.path.join(run["checkpoint"], "model", "config.json"))
    extra_mib = (large_params - small_params) * 4 / MIB  # one fp32 copy of the extra parameters
    growth = {name: run["peak_mib"] - run["before_mib"] for name, run in (("small", small), ("large", large))}
    assert growth["large"] - growth["small"] < 0.1 * extra_mib, (growth, extra_mib)
