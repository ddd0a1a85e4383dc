"""Fixtures shared by the rollout tests: the test envs registered in this process and a policy that uses them."""
import pytest

from tests.rl import agent_envs


@pytest.fixture(scope="session")
def fitted_lookup_policy():
    """(model, tokenizer): a debug model SFT-ed on the lookup demos, trained once per session."""
    return agent_envs.train_lookup_policy()


@pytest.fixture(scope="module")
def lookup_policy(fitted_lookup_policy):
    """The fitted policy, with the test env ids registered here for the module's duration only."""
    agent_envs.register()
    yield fitted_lookup_policy
    agent_envs.unregister()
