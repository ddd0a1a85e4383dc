"""Fixtures shared by the rollout tests: the test envs registered in this process and a policy that uses them."""
import pytest

from tests.rl import agent_envs


@pytest.fixture(scope="session")
def fitted_lookup_policy():
    """(model, tokenizer): a debug model SFT-ed on the lookup demos, trained once per session."""
    return agent_envs.train_lookup_policy()


@pytest.fixture(scope="session")
def kimi_linear_sample_root(tmp_path_factory):
    """A folder holding runs/kimi_linear_import/hf: the prepare step of recipes/kimi_linear_import.yaml."""
    from transformers.utils import logging as hf_logging

    from jointrl.model.hf_sample import write_sample

    root = tmp_path_factory.mktemp("kimi_linear_import")
    # Made on first use, inside a test that may be capturing stderr: transformers' shard-writing bar would land there.
    hf_logging.disable_progress_bar()
    try:
        write_sample(root / "runs" / "kimi_linear_import" / "hf")
    finally:
        hf_logging.enable_progress_bar()
    return root


@pytest.fixture
def prepared_recipe(request, monkeypatch):
    """Call with a shipped recipe's file name: runs it from a folder where its prepare step was done, if it has one."""
    def prepare(name: str) -> None:
        if name == "kimi_linear_import.yaml":
            monkeypatch.chdir(request.getfixturevalue("kimi_linear_sample_root"))
    return prepare


@pytest.fixture(scope="module")
def lookup_policy(fitted_lookup_policy):
    """The fitted policy, with the test env ids registered here for the module's duration only."""
    agent_envs.register()
    yield fitted_lookup_policy
    agent_envs.unregister()
