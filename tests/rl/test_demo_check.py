"""The copy check: each env id's unseen demos (or their drill pairs) under teacher forcing, against a
prefix-by-prefix reference."""
import copy
import math

import pytest
import torch
import torch.nn.functional as F

from jointrl.rl.cold_start import check_pairs_of, check_set
from jointrl.rl.demo_check import check_demos, check_pairs
from jointrl.rl.drill import drill_pairs, reply_start, train_drill
from jointrl.rl.recipe import load_recipe
from jointrl.rl.sft import Conversation, encode
from tests.rl import agent_envs


def _lookup_demos(seeds, wrong_answer=False):
    demos = []
    for seed in seeds:
        env = agent_envs.Lookup()
        obs = env.reset(seed)
        messages = obs.messages + env.demo()
        if wrong_answer:
            # The memorised policy answers the word's length; one more is a demo it cannot reproduce.
            messages[-1] = {**messages[-1], "content": str(int(messages[-1]["content"]) + 1)}
        demos.append(Conversation(messages, obs.tools, "low"))
    return demos


def _reference(model, examples):
    """Loss, token accuracy, reproduced fraction, wrong tokens per example and each example's first wrong token
    (index in ids, predicted id), from one forward per generated token over its prefix alone."""
    nll, hits, tokens, reproduced, wrong, first = 0.0, 0, 0, 0, [], []
    for ids, mask in examples:
        misses = []
        for t in range(1, len(ids)):
            if not mask[t]:
                continue
            with torch.no_grad():
                logits = model(torch.tensor([ids[:t]])).logits[0, -1]
            nll += F.cross_entropy(logits[None], torch.tensor([ids[t]])).item()
            right = int(logits.argmax()) == ids[t]
            hits += right
            tokens += 1
            if not right:
                misses.append((t, int(logits.argmax())))
        reproduced += not misses
        wrong.append(len(misses))
        first += misses[:1]
    return nll / tokens, hits / tokens, reproduced / len(examples), wrong, first


def test_the_check_matches_a_prefix_by_prefix_reference_and_tells_a_copied_family_from_one_that_is_not(
        fitted_lookup_policy):
    model, tokenizer = fitted_lookup_policy
    demos = {"copied": _lookup_demos(range(4)), "off": _lookup_demos(range(4), wrong_answer=True)}
    checks = {c.env_id: c for c in check_demos(model, tokenizer, demos, 512)}
    for env_id, conversations in demos.items():
        rows = encode(tokenizer, conversations, 512)
        loss, accuracy, reproduced, wrong, first = _reference(model, rows)
        c = checks[env_id]
        assert c.examples == 4
        assert math.isclose(c.loss, loss, rel_tol=1e-4)
        assert c.token_accuracy == pytest.approx(accuracy, abs=1e-12)
        assert c.reproduced == reproduced
        assert c.wrong_tokens == wrong
        # Each example that misses names its first wrong token: the demo's own, the argmax, and the text before it.
        ids_of = [ids for (ids, _), n in zip(rows, wrong) if n]
        assert c.misses == [{"context": tokenizer.decode(ids[max(0, at - 12):at]), "want": tokenizer.decode([ids[at]]),
                             "got": tokenizer.decode([got])} for ids, (at, got) in zip(ids_of, first)][:3]
    # The policy was fitted to these demos (train_lookup_policy); none with a wrong answer is its argmax throughout.
    assert checks["copied"].reproduced > 0 and checks["off"].reproduced == 0
    assert len(checks["off"].misses) == 3 and all(checks["off"].wrong_tokens)
    assert checks["off"].token_accuracy < checks["copied"].token_accuracy and checks["off"].loss > checks["copied"].loss
    assert not model.training


def test_the_pair_check_counts_the_reply_only_as_the_drill_does(fitted_lookup_policy):
    model, tokenizer = fitted_lookup_policy
    demos = {"lookup": _lookup_demos(range(3))}
    pairs = check_pairs_of(tokenizer, demos, 512, "calls")
    texts = drill_pairs(demos["lookup"], "calls")
    assert [ids for ids, _ in pairs["lookup"]] == [tokenizer.encode(t) for t in texts]
    [c] = check_pairs(model, pairs)
    starts = [reply_start(t, tokenizer.encode(t), tokenizer.decode) for t in texts]
    rows = [(ids, [t >= start for t in range(len(ids))]) for (ids, _), start in zip(pairs["lookup"], starts)]
    loss, accuracy, reproduced, wrong, _ = _reference(model, rows)
    assert c.wrong_tokens == wrong and c.misses == [], "pairs are checked without a tokenizer: no misses as text"
    assert c.examples == 3 and math.isclose(c.loss, loss, rel_tol=1e-4)
    assert c.token_accuracy == pytest.approx(accuracy, abs=1e-12) and c.reproduced == reproduced


def test_checks_between_drill_steps_leave_its_weights_as_they_would_be(fitted_lookup_policy):
    policy, tokenizer = fitted_lookup_policy
    pairs = check_pairs_of(tokenizer, {"lookup": _lookup_demos(range(3))}, 512, "calls")
    encoded = [ids for ids, _ in pairs["lookup"]] * 2
    trained = []
    for checking in (False, True):
        model = copy.deepcopy(policy)

        def log(step, loss):
            check_pairs(model, pairs)
            assert model.training, "the check hands the model back in training mode"

        log = log if checking else None
        train_drill(model, encoded, steps=3, lr=1e-3, batch_size=2, pack=2, max_len=64, pad_id=tokenizer.pad_id, log=log)
        trained.append(model.state_dict())
    assert all(torch.equal(trained[0][k], trained[1][k]) for k in trained[0])
    assert any(not torch.equal(trained[0][k], v) for k, v in policy.state_dict().items()), "the drill trained nothing"


def test_check_seeds_past_the_train_range_name_the_keys():
    cfg = load_recipe("quickstart", ["trainer.sft.check_demos=8", "envs.train_seeds.stop=100"])
    with pytest.raises(ValueError, match=r"trainer\.sft\.check_demos=8: its seeds 96\.\.104 run past "
                                         r"envs\.train_seeds\.stop=100"):
        check_set(cfg, ["reasoning/syllogism-v0:default"], 96)


def test_drill_checks_without_check_demos_name_the_key():
    with pytest.raises(ValueError, match=r"trainer\.sft\.drill_check_every.*set check_demos too"):
        load_recipe("quickstart", ["trainer.sft.drill_check_every=10"])
