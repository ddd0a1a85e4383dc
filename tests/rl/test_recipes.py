"""The shipped run recipes: each checks clean, its env globs select registered envs, and it sets what it is for."""
import pytest

from jointrl.envs import registry
from jointrl.rl.commands.cli import main
from jointrl.rl.recipe import load_recipe, shipped_recipes_dir
from jointrl.rl.rollout.task_sampler import TaskSampler

SHIPPED = sorted(p.name for p in shipped_recipes_dir().glob("*.yaml"))
SMALL = ["agents_cpu.yaml", "ep2_cpu.yaml", "gspo_async.yaml", "joint_grpo.yaml", "learning_cpu.yaml",
         "ppo_critic.yaml", "quickstart.yaml"]
AGENT_DOMAINS = {"terminal", "swe", "browse", "cad", "office"}


def test_the_run_recipes_are_shipped():
    assert set(SMALL) | {"moe-2.8t.yaml"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_recipe_check_passes(name, capsys, prepared_recipe):
    prepared_recipe(name)
    assert main(["recipe", "check", name]) == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("model:")


@pytest.mark.parametrize("name", SMALL + ["moe-2.8t.yaml"])
def test_env_globs_select_registered_envs_and_the_sampler_accepts_the_mix(name):
    cfg = load_recipe(name)
    for entry in cfg.envs.mix:
        assert registry.env_ids(entry.glob), f"{name}: {entry.glob!r} selects no env"
    sampler = TaskSampler.from_config(cfg)
    tasks = sampler.next_step()
    assert len(tasks) == cfg.trainer.prompts_per_step * cfg.rollout.group_size
    assert all(cfg.envs.train_seeds.start <= t.seed < cfg.envs.train_seeds.stop for t in tasks)


def test_joint_grpo_covers_every_domain_with_domain_normalisation():
    cfg = load_recipe("joint_grpo")
    domains = {registry.spec(i).domain for e in cfg.envs.mix for i in registry.env_ids(e.glob)}
    assert domains == AGENT_DOMAINS | {"reasoning"}
    assert cfg.model.name in ("tiny", "small")
    assert cfg.rewards.normalization == "domain"
    assert cfg.rollout.tier_selection.mode in ("ratios", "auto")
    assert cfg.algorithm.name == "grpo" and cfg.algorithm.dynamic_sampling
    assert cfg.algorithm.clip_eps_high > cfg.algorithm.clip_eps_low


def test_agents_cpu_mixes_two_agent_domains_and_drills_the_replies_copy():
    cfg = load_recipe("agents_cpu")
    domains = {registry.spec(i).domain for e in cfg.envs.mix for i in registry.env_ids(e.glob)}
    assert domains == {"terminal", "cad"}
    assert cfg.trainer.sft.drill_loss == "reply" and cfg.trainer.sft.drill_steps > 0
    # A CAD episode is three calls: run_program, measure, submit.
    assert cfg.rollout.max_turns >= 3
    # RL sharpens through the final norm's gain alone; the inner gains at its rate cost the gain (docs/learning.md).
    assert cfg.learner.norm_lr_scale > 1 and cfg.learner.norm_lr_gains == "final"
    # With mini's two softmax heads a layer, channel's copy formed on one cold start of three (docs/learning.md).
    assert cfg.model.name == "mini" and cfg.model.attn_heads == 4
    # Each demonstration seen once: six epochs over 256 a family let SFT memorise their numbers (docs/learning.md).
    assert cfg.trainer.sft.epochs == 1 and all(entry.demos >= 1536 for entry in cfg.envs.mix)


def test_ppo_critic_uses_gae_without_group_normalisation():
    cfg = load_recipe("ppo_critic")
    assert cfg.algorithm.name == "ppo"
    assert cfg.rewards.normalization in ("none", "domain")


def test_gspo_async_bounds_staleness_and_caps_importance_weights():
    cfg = load_recipe("gspo_async")
    assert cfg.algorithm.name == "gspo"
    assert cfg.rollout.max_staleness == 2
    assert cfg.algorithm.tis_cap is not None


def test_ep2_cpu_is_two_expert_parallel_ranks_on_a_small_model():
    cfg = load_recipe("ep2_cpu")
    learner = cfg.learner
    assert (learner.ranks, learner.ep_size, learner.zero_stage) == (2, 2, 2)
    assert cfg.rollout.workers == 2
    assert cfg.model.name in ("debug", "tiny") and cfg.model.n_experts % 2 == 0
    assert learner.dtype == "fp32" and learner.backend in ("auto", "gloo")
    assert cfg.trainer.steps <= 5 and cfg.tracking.wandb_mode != "online"


def test_full_scale_recipe_uses_the_2_8t_preset_in_bf16():
    cfg = load_recipe("moe-2.8t.yaml")
    assert cfg.model.name == "moe-2.8t" and cfg.model.n_experts == 800
    assert cfg.learner.dtype == "bf16" and cfg.learner.zero_stage == 2
    assert cfg.model.n_experts % cfg.learner.ep_size == 0
    assert cfg.rollout.mxfp4_experts and cfg.tracking.wandb_mode == "offline"
