"""benchmarks/learning.py's draw-probability summary and its report pooled over cold starts, on hand-written data;
its reuse of earlier cold starts and their SFT evaluations, and its held-out seed offset."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from rich.console import Console

from jointrl.envs.episode import Episode
from jointrl.model.checkpoint import save_pretrained
from jointrl.model.transformer import Transformer
from jointrl.rl.demos import mix_env_ids
from jointrl.rl.evaluate import summarize
from jointrl.rl.recipe import load_recipe
from tests.benchmarks.bench_module import load_benchmark


def test_mean_mix_averages_each_joint_arm_over_its_steps():
    histories = {
        "single:terminal": [{"mix/t": 1.0}],
        "joint": [{"mix/a": 0.5, "mix/b": 0.5, "reward/mean": 0.1}] * 3,
        "learnability": [{"mix/a": 0.5, "mix/b": 0.5}, {"mix/a": 0.2, "mix/b": 0.8}, {"mix/a": 0.2, "mix/b": 0.8}],
        "sft": [],
    }
    console = Console(record=True, width=120)
    means = load_benchmark("learning").mean_mix(histories, console)
    assert set(means) == {"joint", "learnability"}  # single-domain arms draw one domain; they have nothing to compare
    assert means["joint"] == {"a": 0.5, "b": 0.5}
    assert means["learnability"] == pytest.approx({"a": 0.3, "b": 0.7})
    assert "0.700" in console.export_text()


def _evaluation(successes):
    """An evaluation of text-count seeds 1, 2, ... with one episode each: success per seed."""
    trajectories = [SimpleNamespace(episode=Episode(env_id="terminal/text-count-v0:easy", domain="terminal",
                                                    family="text-count", difficulty="easy", seed=seed, tier="low",
                                                    signals={"success": float(ok)}))
                    for seed, ok in enumerate(successes, 1)]
    return summarize(trajectories, [float(ok) for ok in successes])


def test_the_report_pools_cold_starts_by_the_mean_of_their_changes():
    # Cold start 1: SFT 1 of 4, joint 3 of 4 (+0.5); cold start 2: SFT 2 of 4, joint 2 of 4 (0): pooled +0.25.
    runs = [{"sft": _evaluation([1, 0, 0, 0]), "joint": _evaluation([1, 1, 1, 0])},
            {"sft": _evaluation([1, 1, 0, 0]), "joint": _evaluation([1, 1, 0, 0])}]
    bench = load_benchmark("learning")
    console = Console(record=True, width=200)
    results = bench.report(runs, console)
    pooled = results["vs_sft"]["joint"]["terminal/text-count"]
    assert (pooled["a"], pooled["b"], pooled["change"], pooled["tasks"]) == (0.375, 0.625, 0.25, 8)
    # Drawing cold start 2 twice gives 0 a quarter of the time, so the lower bound is at most 0: not significant.
    assert pooled["low"] <= 0.0 and not pooled["significant"]
    assert "pooled over 2 cold starts" in console.export_text()
    alone = bench.report(runs[:1], Console(record=True, width=200))["vs_sft"]["joint"]["terminal/text-count"]
    assert alone["change"] == 0.5 and alone["tasks"] == 4


def test_pool_reads_back_the_evaluations_runs_kept_and_pools_them(tmp_path):
    bench = load_benchmark("learning")
    # The cold starts of the test above, kept by two runs; the second also kept an arm the first did not run.
    bench.save_evaluation(tmp_path / "a", "sft", _evaluation([1, 0, 0, 0]))
    bench.save_evaluation(tmp_path / "a", "joint", _evaluation([1, 1, 1, 0]))
    bench.save_evaluation(tmp_path / "b", "sft", _evaluation([1, 1, 0, 0]))
    bench.save_evaluation(tmp_path / "b", "joint", _evaluation([1, 1, 0, 0]))
    bench.save_evaluation(tmp_path / "b", "learnability", _evaluation([1, 1, 1, 1]))
    console = Console(record=True, width=200)
    results = bench.pool([tmp_path / "a", tmp_path / "b"], tmp_path / "pooled", console)
    assert set(results["vs_sft"]) == {"joint"} and "left out (not in every run): learnability" in console.export_text()
    pooled = json.loads((tmp_path / "pooled" / "learning.json").read_text())["vs_sft"]["joint"]["terminal/text-count"]
    assert (pooled["a"], pooled["b"], pooled["change"], pooled["tasks"]) == (0.375, 0.625, 0.25, 8)
    with pytest.raises(SystemExit, match=r"--pool: no .*c/evals/sft.json; give the directory of one cold start"):
        bench.main(["--pool", f"{tmp_path / 'a'},{tmp_path / 'c'}", "--out", str(tmp_path / "x")])
    with pytest.raises(SystemExit, match=r"--pool ',': give one or more run directories"):
        bench.main(["--pool", ",", "--out", str(tmp_path / "x")])
    (tmp_path / "a" / "evals" / "joint.json").write_text("{")
    with pytest.raises(SystemExit, match=r"--pool: .*a/evals/joint.json: Expecting"):
        bench.main(["--pool", f"{tmp_path / 'a'},{tmp_path / 'b'}", "--out", str(tmp_path / "x")])


def test_a_cold_start_alone_reports_its_pass_rate_per_family():
    # --arms sft: no RL arm to compare with, so the SFT column is the cold start's own rate (1 of 4, then 3 of 4).
    runs = [{"sft": _evaluation([1, 0, 0, 0])}, {"sft": _evaluation([1, 1, 1, 0])}]
    console = Console(record=True, width=200)
    load_benchmark("learning").report(runs, console)
    rows = [line for line in console.export_text().splitlines() if "text-count" in line or "all" in line]
    assert len(rows) == 2 and all("0.500" in row for row in rows)


def test_held_out_points_run_from_the_sft_checkpoint_to_the_arms_last_step(tmp_path):
    bench = load_benchmark("learning")
    arm = _evaluation([1, 1, 1, 0])
    # The SFT evaluation also played a CAD task, which a terminal-only arm did not: step 0 leaves it out.
    cad = SimpleNamespace(episode=Episode(env_id="cad/shaft-v0:easy", domain="cad", family="shaft", difficulty="easy",
                                          seed=1, tier="low", signals={"success": 1.0}))
    text_count = _evaluation([1, 0, 0, 0])
    sft = summarize([*text_count.trajectories, cad], [*text_count.rewards, 1.0])
    trainer_evals = {24: {"pass_rate/terminal": 0.5, "pass_rate/all": 0.5, "tier/low/pass_rate": 0.5}}
    points = bench.held_out_points(sft, arm, 48, trainer_evals)
    assert points == [{"step": 0, "tasks": "benchmark", "terminal": 0.25, "all": 0.25},
                      {"step": 24, "tasks": "trainer", "terminal": 0.5, "all": 0.5},
                      {"step": 48, "tasks": "benchmark", "terminal": 0.75, "all": 0.75}]
    # The plot takes the step metrics' per-domain rewards beside the batch's and a component's, and these points.
    history = [{"reward/mean": 0.2, "reward/terminal/mean": 0.2, "reward/terminal/component/correctness/mean": 0.2}]
    bench.plot({"joint": history * 48, "sft": []}, {"joint": points}, tmp_path / "learning.png")
    assert (tmp_path / "learning.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_held_out_offset_moves_every_env_id_to_later_seeds(monkeypatch):
    bench = load_benchmark("learning")
    cfg = load_recipe("quickstart", ["model.preset=debug"])
    asked = {}

    def fake_evaluate(model, tokenizer, cfg, env_ids, seeds, **kwargs):
        asked["seeds"], asked["samples"] = seeds, kwargs["samples"]
        return "summary"

    monkeypatch.setattr(bench, "evaluate", fake_evaluate)
    state = Transformer(cfg.model).state_dict()
    assert bench.held_out(cfg, None, state, ["terminal/text-count-v0:easy"], 3, 2, offset=5) == "summary"
    first = cfg.envs.eval_seeds.start
    assert asked == {"seeds": [first + 5, first + 6, first + 7], "samples": 2}


def test_an_earlier_cold_start_must_exist_and_hold_the_recipes_model(tmp_path):
    bench = load_benchmark("learning")
    cfg = load_recipe("quickstart", ["model.preset=debug"])
    with pytest.raises(SystemExit, match="no SFT checkpoint at .*seed-0/sft/checkpoints/sft"):
        bench.earlier_cold_start(cfg, tmp_path / "seed-0")
    save_pretrained(Transformer(cfg.model), tmp_path / "seed-0" / "sft" / "checkpoints" / "sft")
    other = load_recipe("quickstart", ["model.preset=debug", "model.layer_pattern=KSKS"])
    with pytest.raises(SystemExit, match="other than the recipe's: layer_pattern 'KSKL' .checkpoint. vs 'KSKS'"):
        bench.earlier_cold_start(other, tmp_path / "seed-0")


def test_an_earlier_runs_sft_evaluation_is_taken_over_only_for_the_same_tasks_and_sections(tmp_path, monkeypatch):
    bench = load_benchmark("learning")
    cfg = load_recipe("quickstart", ["model.preset=debug"])
    env_ids = ["terminal/text-count-v0:easy"]
    checkpoint = tmp_path / "ckpt"
    checkpoint.mkdir()
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    start = bench.ColdStart(Transformer(cfg.model), None, checkpoint, env_ids, demos=0, losses=[])
    first = cfg.envs.eval_seeds.start + 2
    kept = _evaluation([1, 0, 1, 1])
    # As `evaluate` records them: 4 seeds from the offset, 1 sample, the rollout temperature, the trainer seed.
    kept.settings.update(env_ids=env_ids, seeds=[first, first + 1, first + 2, first + 3], tiers=None,
                         tiers_played=["low"], samples=1, temperature=cfg.rollout.temperature, seed=cfg.trainer.seed)
    bench.save_evaluation(tmp_path / "earlier", "sft", kept, bench.eval_inputs(cfg, checkpoint))
    played = []

    def fake_evaluate(model, tokenizer, cfg, env_ids, seeds, **kwargs):
        played.append(seeds)
        return _evaluation([0, 0, 0, 0])

    monkeypatch.setattr(bench, "evaluate", fake_evaluate)

    def run(cfg, out, seeds=4):
        console = Console(record=True, width=300)
        evals, _, _, _ = bench.one_cold_start(cfg, ["sft"], [], seeds, 1, tmp_path / out, console, eval_offset=2,
                                              start=start, earlier=tmp_path / "earlier")
        return evals["sft"], console.export_text()

    summary, text = run(cfg, "same")
    assert not played and "taken from" in text
    assert [t.episode.signals["success"] for t in summary.trajectories] == [1.0, 0.0, 1.0, 1.0]
    # The new run keeps it too, with the sections it was played under, so that --pool and a later reuse find it.
    again, why = bench.kept_evaluation(tmp_path / "same", "sft", bench.held_out_settings(cfg, env_ids, 4, 1, offset=2),
                                      bench.eval_inputs(cfg, checkpoint))
    assert again is not None and again.pass_rate == kept.pass_rate, why
    # Other seeds, the same seeds under another rollout section, or from other checkpoint files, are played again.
    _, text = run(cfg, "fewer", seeds=3)
    assert played == [[first, first + 1, first + 2]] and "seeds differ" in text
    longer = load_recipe("quickstart", ["model.preset=debug", "rollout.max_new_tokens_per_turn=7"])
    _, text = run(longer, "longer")
    assert len(played) == 2 and "another rollout" in text
    (checkpoint / "model.safetensors").write_bytes(b"weights trained again")
    _, text = run(cfg, "retrained")
    assert len(played) == 3 and "another checkpoint" in text
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    # An evaluation kept without its sections (before they were recorded) is not trusted.
    bench.save_evaluation(tmp_path / "earlier", "sft", kept)
    _, text = run(cfg, "unrecorded")
    assert len(played) == 4 and "does not record the recipe sections" in text


@pytest.mark.slow
def test_two_shrunk_cold_starts_write_their_runs_and_a_pooled_table(tmp_path, capsys):
    out = tmp_path / "bench"
    shrink = ["model.preset=debug", "tokenizer.n_samples=50", "trainer.sft.epochs=1", "trainer.sft.batch_size=4",
              "envs.mix[0].demos=1", "envs.mix[1].demos=1", "trainer.sft.drill_steps=2",
              "trainer.sft.drill_demos_per_env=1",
              "trainer.sft.max_len=448", "rollout.max_new_tokens_per_turn=8", "rollout.max_new_tokens_per_episode=16",
              "trainer.steps=1", "trainer.prompts_per_step=2", "rollout.group_size=2", "rollout.workers=1",
              "tracking.wandb_mode=disabled", "checkpoint.every=0"]
    bench = load_benchmark("learning")
    code = bench.main(["quickstart", *shrink, "--arms", "sft,joint", "--eval-seeds", "2", "--eval-samples", "1",
                       "--trainer-seeds", "3,4", "--out", str(out)])
    assert code == 0
    summary = json.loads((out / "learning.json").read_text())
    assert summary["trainer_seeds"] == [3, 4] and set(summary["per_seed"]) == {"3", "4"}
    # Each cold start plays its env ids x 2 held-out seeds; the pooled change is over both runs' tasks.
    tasks = 2 * len(mix_env_ids([m.glob for m in load_recipe("quickstart").envs.mix]))
    assert summary["vs_sft"]["joint"]["all"]["tasks"] == 2 * tasks
    for seed in (3, 4):
        per_seed = json.loads((out / f"seed-{seed}" / "learning.json").read_text())
        assert per_seed["trainer_seed"] == seed and per_seed["vs_sft"]["joint"]["all"]["tasks"] == tasks
        assert (out / f"seed-{seed}" / "learning.png").is_file() and (out / f"seed-{seed}" / "joint").is_dir()
    assert "pooled over 2 cold starts" in capsys.readouterr().out
    # The evaluations each cold start kept pool to the same table without training anything.
    runs = f"{out / 'seed-3'},{out / 'seed-4'}"
    code = load_benchmark("learning").main(["--pool", runs, "--out", str(tmp_path / "pooled")])
    assert code == 0
    pooled = json.loads((tmp_path / "pooled" / "learning.json").read_text())
    assert pooled["vs_sft"] == summary["vs_sft"]

    # The same cold starts reused: nothing is trained again, and the SFT checkpoints score as they did.
    again = tmp_path / "again"
    bench = load_benchmark("learning")
    code = bench.main(["quickstart", *shrink, "--arms", "sft,joint", "--eval-seeds", "2", "--eval-samples", "1",
                       "--trainer-seeds", "3,4", "--cold-starts", str(out), "--out", str(again)])
    assert code == 0
    for seed in (3, 4):
        assert not (again / f"seed-{seed}" / "sft").exists()
        before = json.loads((out / f"seed-{seed}" / "learning.json").read_text())["vs_sft"]["joint"]["all"]
        reused = json.loads((again / f"seed-{seed}" / "learning.json").read_text())["vs_sft"]["joint"]["all"]
        assert reused["a"] == before["a"] and reused["tasks"] == before["tasks"]
