"""Smoke test: the real quickstart and sft commands on the shipped recipe, shrunk by overrides."""
import json
from pathlib import Path

import pytest

from jointrl.model.checkpoint import from_pretrained
from jointrl.model.tokenizer import JointTokenizer
from jointrl.rl.cold_start import demo_counts
from jointrl.rl.commands.cli import main
from jointrl.rl.evaluate import evaluate
from jointrl.rl.recipe import load_recipe

SHRINK = [
    "model.preset=debug", "tokenizer.n_samples=50", "trainer.sft.epochs=1", "trainer.sft.batch_size=4",
    # The recipe sets each mix entry's demonstrations.
    "envs.mix[0].demos=1", "envs.mix[1].demos=1", "trainer.sft.drill_steps=2", "trainer.sft.drill_demos_per_env=1",
    "trainer.sft.max_len=448", "rollout.max_turns=2",
    "rollout.max_new_tokens_per_turn=8", "rollout.max_new_tokens_per_episode=16",
]
# The RL stage shrunk to one step of two prompts on one worker and one learner rank.
RL_SHRINK = [
    "trainer.steps=1", "trainer.prompts_per_step=2", "rollout.group_size=2", "rollout.workers=1",
    "learner.ranks=1", "learner.ep_size=1", "trainer.eval_seeds_per_env=1", "trainer.eval_samples=1",
    "trainer.eval_every=0", "checkpoint.every=1", "tracking.wandb_mode=disabled",
]


def test_quickstart_runs_every_stage_and_leaves_loadable_checkpoints(tmp_path, capsys):
    run_dir = tmp_path / "run"
    code = main(["quickstart", "quickstart", *SHRINK, *RL_SHRINK, f"tracking.run_dir={run_dir}"])
    out = capsys.readouterr().out
    assert code == 0, out
    for stage in ("supervised cold start", "evaluation of the SFT checkpoint", "joint RL", "evaluation after RL",
                  "SFT checkpoint vs after RL", "change", "95% CI", "terminal/text-count"):
        assert stage in out
    ckpt = Path(run_dir) / "checkpoints" / "sft"
    model = from_pretrained(ckpt)
    tokenizer = JointTokenizer.load(ckpt)
    assert model.cfg.name == "debug" and tokenizer.vocab_size == model.cfg.vocab_size == 512
    rl = Path(run_dir) / "checkpoints" / "rl" / "step-00000001"
    assert from_pretrained(rl / "model").cfg.name == "debug"
    assert (Path(run_dir) / "metrics.jsonl").read_text().count("\n") == 1
    assert len(list((Path(run_dir) / "rollouts").glob("step-*.parquet"))) == 1
    # A second quickstart into the same directory is refused before any work, naming the flag that allows it.
    assert main(["quickstart", "quickstart", *SHRINK, *RL_SHRINK, f"tracking.run_dir={run_dir}"]) == 1
    assert "already holds an SFT run" in capsys.readouterr().err


def test_sft_command_writes_the_checkpoint_where_the_recipe_says_and_checks_it_on_unseen_demos(
        tmp_path, capsys, monkeypatch):
    import jointrl.rl.cold_start as cold_start

    seeds = []
    plain = cold_start.collect_demos

    def spy(env_ids, env_seeds, tiers=None, cache=None):
        seeds.append(list(env_seeds))
        return plain(env_ids, env_seeds, tiers, cache)

    monkeypatch.setattr(cold_start, "collect_demos", spy)
    ckpt_dir = tmp_path / "ckpts"
    # The debug preset's 512 tokens hold no text-count reply: the check covers the model's context, not SFT's cut.
    assert main(["sft", "quickstart", *SHRINK, "trainer.sft.check_demos=2", "trainer.sft.drill_check_every=1",
                 "model.max_seq_len=2048", f"checkpoint.dir={ckpt_dir}", f"tracking.run_dir={tmp_path / 'run'}",
                 "tracking.wandb_mode=disabled"]) == 0
    assert (ckpt_dir / "sft" / "model.safetensors").is_file()
    out = capsys.readouterr().out
    assert "loss" in out and "copy check" in out
    written = json.loads((tmp_path / "run" / "copy_check.json").read_text())
    env_ids = list(demo_counts(load_recipe("quickstart", SHRINK)))
    assert [c["env_id"] for c in written["sft"]] == env_ids
    # Fractions only: reproduced may exceed token accuracy when the demos reproduced whole are the short ones.
    assert all(c["examples"] == 2 and 0 <= c["reproduced"] <= 1 and 0 <= c["token_accuracy"] <= 1
               for c in written["sft"])
    # Each example's wrong-token count, and the first miss of each example that has one (three at most), in context.
    assert all(len(c["wrong_tokens"]) == 2 and c["reproduced"] == c["wrong_tokens"].count(0) / 2
               and len(c["misses"]) == min(3, 2 - c["wrong_tokens"].count(0)) for c in written["sft"])
    # One check after each of the two drill steps, on the pairs of the check demos (syllogism's turns call no tool).
    assert [d["step"] for d in written["drill"]] == [1, 2]
    assert [c["env_id"] for c in written["drill"][0]["checks"]] == env_ids
    # Each env id's two check seeds first, then its SFT seed, then the drill's seed: none of the check's trained on.
    check, trained = seeds[: len(env_ids)], seeds[len(env_ids):]
    assert check == [[2, 3]] * len(env_ids) and {0, 1} == {s for env_seeds in trained for s in env_seeds}


def test_sft_with_no_sequence_inside_max_len_names_the_key(tmp_path, capsys):
    code = main(["sft", "quickstart", *SHRINK, "trainer.sft.max_len=8", f"checkpoint.dir={tmp_path}",
                 f"tracking.run_dir={tmp_path / 'run'}", "tracking.wandb_mode=disabled"])
    assert code == 1
    assert "trainer.sft.max_len=8" in capsys.readouterr().err


def test_evaluation_refuses_training_seeds(tmp_path):
    cfg = load_recipe("quickstart", SHRINK)
    with pytest.raises(ValueError, match="outside the held-out range"):
        evaluate(None, None, cfg, ["browse/lookup-v0:easy"], [cfg.envs.train_seeds.start])


def test_the_drill_draws_env_ids_alike_cuts_at_its_own_length_and_counts_replies_when_the_recipe_says(
        tmp_path, capsys, monkeypatch):
    import jointrl.rl.cold_start as cold_start

    seen = {}
    plain = cold_start.train_drill

    def spy(model, encoded, **kwargs):
        seen.update(pairs=len(encoded), envs=kwargs["envs"], max_len=kwargs["max_len"], starts=kwargs["starts"],
                    lengths=[len(ids) for ids in encoded])
        return plain(model, encoded, **kwargs)

    monkeypatch.setattr(cold_start, "train_drill", spy)
    # drill_turns=all takes syllogism's answers too, so both env ids of the mix have pairs.
    assert main(["sft", "quickstart", *SHRINK, "trainer.sft.drill_balance=env", "trainer.sft.drill_turns=all",
                 "trainer.sft.drill_max_len=96", "trainer.sft.drill_loss=reply", f"checkpoint.dir={tmp_path}",
                 f"tracking.run_dir={tmp_path / 'run'}", "tracking.wandb_mode=disabled"]) == 0
    assert len(seen["envs"]) == 2 and all(seen["envs"])
    assert seen["max_len"] == 96  # the drill's own length, not SFT's
    assert sorted(i for env in seen["envs"] for i in env) == list(range(seen["pairs"]))
    assert "pairs of 2 env id(s)" in capsys.readouterr().out
    # Each pair's reply starts after its message and arrow (at least a token each) and holds at least one token.
    assert len(seen["starts"]) == seen["pairs"]
    assert all(2 <= start < length for start, length in zip(seen["starts"], seen["lengths"]))


def test_drill_in_sft_gives_each_sft_step_a_batch_of_whole_drill_pairs_counting_their_replies(tmp_path, monkeypatch):
    import jointrl.rl.cold_start as cold_start

    drilled, extras = {}, []
    plain_drill, plain_sft = cold_start.train_drill, cold_start.train_sft

    def drill_spy(model, encoded, **kwargs):
        drilled.update(encoded=encoded, starts=kwargs["starts"])
        return plain_drill(model, encoded, **kwargs)

    def sft_spy(model, examples, **kwargs):
        extras.append(kwargs["extra"])
        return plain_sft(model, examples, **kwargs)

    monkeypatch.setattr(cold_start, "train_drill", drill_spy)
    monkeypatch.setattr(cold_start, "train_sft", sft_spy)
    assert main(["sft", "quickstart", *SHRINK, "trainer.sft.drill_in_sft=true", "trainer.sft.drill_turns=all",
                 "trainer.sft.drill_max_len=96", "trainer.sft.drill_loss=reply", f"checkpoint.dir={tmp_path}",
                 f"tracking.run_dir={tmp_path / 'run'}", "tracking.wandb_mode=disabled"]) == 0
    [extra] = extras
    batch = extra()
    assert batch.tokens.shape[1] <= 96
    pairs = [(tuple(ids), start) for ids, start in zip(drilled["encoded"], drilled["starts"])]
    for row in range(batch.tokens.shape[0]):
        ids = batch.tokens[row].tolist() + batch.targets[row, -1:].tolist()
        counted = [False] + batch.loss_mask[row].bool().tolist()  # counted[t]: is ids[t] a target of the loss
        # Walk the row pair by pair: each stretch is one of the drill's pairs (the last one maybe cut), and the loss
        # counts exactly its reply's tokens.
        at = 0
        while at < len(ids):
            match = next(((pair, start) for pair, start in pairs
                          if tuple(ids[at: at + len(pair)]) == pair[: len(ids) - at]), None)
            assert match is not None, f"row {row} at {at} is no drill pair"
            pair, start = match
            span = min(len(pair), len(ids) - at)
            assert counted[at: at + span] == [t >= start for t in range(span)]
            at += span


def test_the_drill_trains_on_demos_with_their_slots_redrawn_and_sft_on_the_envs_own(tmp_path, monkeypatch):
    import jointrl.rl.cold_start as cold_start
    from jointrl.rl.drill import encode_pairs
    from jointrl.rl.sft import encode

    redrawn, drilled, fitted = [], {}, {}
    plain_redraw, plain_drill, plain_sft = cold_start.redraw, cold_start.train_drill, cold_start.train_sft

    def redraw_spy(conversations, share, rng, kinds):
        out = plain_redraw(conversations, share, rng, kinds)
        redrawn.append((conversations, share, kinds, out))
        return out

    def drill_spy(model, encoded, **kwargs):
        drilled["encoded"] = encoded
        return plain_drill(model, encoded, **kwargs)

    def sft_spy(model, examples, **kwargs):
        fitted["examples"] = examples
        return plain_sft(model, examples, **kwargs)

    monkeypatch.setattr(cold_start, "redraw", redraw_spy)
    monkeypatch.setattr(cold_start, "train_drill", drill_spy)
    monkeypatch.setattr(cold_start, "train_sft", sft_spy)
    # Seven text-count demos, so that a file name or word is in fewer than half their questions: a slot.
    # Text-count's slots are names, so a names-only redraw still changes its demos.
    overrides = [*SHRINK, "trainer.sft.drill_redraw=1.0", "trainer.sft.drill_redraw_kinds=[name]",
                 "trainer.sft.drill_demos_per_env=6"]
    assert main(["sft", "quickstart", *overrides, f"checkpoint.dir={tmp_path}", f"tracking.run_dir={tmp_path / 'run'}",
                 "tracking.wandb_mode=disabled"]) == 0
    [(given, share, kinds, out)] = redrawn
    assert share == 1.0 and kinds == ["name"]
    assert any(after is not before and after.source.startswith("terminal/") for before, after in zip(given, out))
    cfg = load_recipe("quickstart", overrides)
    tokenizer = JointTokenizer.load(tmp_path / "sft")
    sft = cfg.trainer.sft
    assert drilled["encoded"] == [ids for conv in out for ids, _ in encode_pairs(
        tokenizer, [conv], sft.drill_turns, sft.drill_format, with_starts=False)]
    # The SFT demos come first in what the drill was given, and SFT trains on them as the env played them.
    sft_demos = given[: sum(demo_counts(cfg).values())]
    assert fitted["examples"] == encode(tokenizer, sft_demos, sft.max_len)
