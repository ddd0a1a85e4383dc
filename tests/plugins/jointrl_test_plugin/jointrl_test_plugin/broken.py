"""A plugin whose registration fails halfway: the env it registered first must not stay behind."""
from jointrl.envs import registry
from jointrl.envs.base import EnvSpec


def register_envs():
    registry.register(EnvSpec(id="broken/half-v0:easy", entry_point="jointrl_test_plugin.envs:WordLength"))
    raise RuntimeError("cannot read broken.toml:\nno such file")
