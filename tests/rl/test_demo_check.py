"""The copy check: each env id's unseen demos under teacher forcing, against a token-by-token reference."""
import math

import pytest
import torch
import torch.nn.functional as F

from jointrl.rl.cold_start import copy_check
from jointrl.rl.demo_check import check_demos
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


def _reference(model, tokenizer, conversations, max_len):
    """Loss, token accuracy and reproduced fraction from one forward per generated token over its prefix alone."""
    nll, hits, tokens, reproduced = 0.0, 0, 0, 0
    examples = encode(tokenizer, conversations, max_len)
    for ids, mask in examples:
        every = True
        for t in range(1, len(ids)):
            if not mask[t]:
                continue
            with torch.no_grad():
                logits = model(torch.tensor([ids[:t]])).logits[0, -1]
            nll += F.cross_entropy(logits[None], torch.tensor([ids[t]])).item()
            right = int(logits.argmax()) == ids[t]
            hits += right
            tokens += 1
            every &= right
        reproduced += every
    return nll / tokens, hits / tokens, reproduced / len(examples)


def test_the_check_matches_a_prefix_by_prefix_reference_and_tells_a_copied_family_from_one_that_is_not(
        fitted_lookup_policy):
    model, tokenizer = fitted_lookup_policy
    demos = {"copied": _lookup_demos(range(4)), "off": _lookup_demos(range(4), wrong_answer=True)}
    checks = {c.env_id: c for c in check_demos(model, tokenizer, demos, 512)}
    for env_id, conversations in demos.items():
        loss, accuracy, reproduced = _reference(model, tokenizer, conversations, 512)
        c = checks[env_id]
        assert c.demos == 4
        assert math.isclose(c.loss, loss, rel_tol=1e-4)
        assert c.token_accuracy == pytest.approx(accuracy, abs=1e-12)
        assert c.reproduced == reproduced
    # The policy was fitted to these demos (train_lookup_policy); none with a wrong answer is its argmax throughout.
    assert checks["copied"].reproduced > 0 and checks["off"].reproduced == 0
    assert checks["off"].token_accuracy < checks["copied"].token_accuracy and checks["off"].loss > checks["copied"].loss
    assert not model.training


def test_check_seeds_past_the_train_range_name_the_keys():
    cfg = load_recipe("quickstart", ["trainer.sft.check_demos=8", "envs.train_seeds.stop=100"])
    with pytest.raises(ValueError, match=r"trainer\.sft\.check_demos=8: its seeds 96\.\.104 run past "
                                         r"envs\.train_seeds\.stop=100"):
        copy_check(cfg, None, None, ["reasoning/syllogism-v0:default"], 96, None)
