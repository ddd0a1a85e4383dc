"""The agent loop: multi-turn tool-calling episodes whose tokens are exactly what a learner recomputes."""
import pytest
import torch

from jointrl.envs import registry
from jointrl.envs.base import Action, Env, EnvSpec, tool
from jointrl.model.chat import render_text
from jointrl.model.generate import SamplingParams
from jointrl.model.presets import PRESETS
from jointrl.model.tokenizer import train_tokenizer
from jointrl.model.transformer import Transformer
from jointrl.rl.agent import AgentLoop, LoopLimits, Task
from jointrl.rl.engine import Engine
from jointrl.rl.sft import Conversation, encode, train_sft

WORDS = ["apple", "banana", "cherry", "grape"]


class Lookup(Env):
    """Look a word's length up with a tool, then answer it."""

    def _reset(self, seed):
        self.word = WORDS[seed % len(WORDS)]
        return [{"role": "system", "content": "Use the tool."}, {"role": "user", "content": f"Length of {self.word}?"}]

    @tool("length of a word", {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})
    def length(self, word):
        return str(len(word))

    def _signals(self):
        return {"success": float(self.final_answer == str(len(self.word)))}

    def _solution(self):
        yield Action("length", {"word": self.word}, reasoning="Ask the tool.")
        yield Action(None, answer=str(len(self.word)), reasoning="Done.")


class Broken(Lookup):
    def _reset(self, seed):
        raise RuntimeError("generator crashed")


@pytest.fixture(scope="module")
def setup():
    ids = [registry.register(EnvSpec(id="test/lookup-v0:easy", entry_point=f"{__name__}:Lookup")).id,
           registry.register(EnvSpec(id="test/broken-v0:easy", entry_point=f"{__name__}:Broken")).id]
    conversations = []
    for seed in range(len(WORDS)):
        env = registry.make(ids[0])
        obs = env.reset(seed)
        conversations.append(Conversation(obs.messages + env.demo(), obs.tools, "low"))
    texts = [render_text(c.messages, c.tools, c.tier) for c in conversations]
    tokenizer = train_tokenizer(texts * 20, 512)
    torch.manual_seed(0)
    model = Transformer(PRESETS["debug"].model_copy(update={"index_topk": 8}))
    # Memorise the demonstrations so greedy decoding really calls the tool and answers.
    train_sft(model, encode(tokenizer, conversations, 512) * 8, epochs=4, lr=1e-2, batch_size=4, pad_id=tokenizer.pad_id)
    yield model.eval(), tokenizer
    for env_id in ids:
        registry._SPECS.pop(env_id)


def play(setup, tasks, budgets=None):
    model, tokenizer = setup
    engine = Engine(model, tokenizer.think_start_id, tokenizer.think_end_id, max_rows=3, record_routing=True)
    limits = LoopLimits(think_budgets=budgets or {"low": 64}, max_turns=4, max_new_tokens_per_turn=48)
    return AgentLoop(engine, tokenizer, limits, SamplingParams(temperature=0)).run(tasks)


def test_episodes_call_tools_and_tokens_reproduce_behaviour_logprobs(setup):
    model, tokenizer = setup
    trajectories = play(setup, [Task("test/lookup-v0:easy", seed, "low", group_id=seed) for seed in range(4)])
    assert sum(t.episode.turns >= 2 for t in trajectories) >= 2, [t.episode.turns for t in trajectories]
    for t in trajectories:
        # The learner-side forward over the returned tokens, replaying the recorded routing and selections.
        with torch.no_grad():
            out = model(t.tokens[None, :-1], routing=t.routed_experts[None], sparse_topk=t.sparse_topk[None])
        logp = torch.log_softmax(out.logits[0], dim=-1).gather(-1, t.tokens[1:, None]).squeeze(-1)
        mask = t.loss_mask[1:].bool()
        assert mask.sum() > 0
        torch.testing.assert_close(logp[mask], t.behavior_logprobs[1:][mask], atol=1e-4, rtol=1e-4)
        # Rendering the recorded conversation gives back the very tokens (no re-tokenisation drift).
        rendered = tokenizer.render(t.episode.messages, t.episode.tools, "low")
        if not t.episode.truncated:
            assert rendered == t.tokens.tolist()
        assert (t.policy_version[t.loss_mask.bool()] == 0).all()


def test_a_failing_env_is_marked_failed_and_others_finish(setup):
    trajectories = play(setup, [Task("test/broken-v0:easy", 0, "low"), Task("test/lookup-v0:easy", 1, "low")])
    assert trajectories[0].episode.failed and "generator crashed" in trajectories[0].episode.error
    assert not trajectories[1].episode.failed and trajectories[1].episode.turns >= 1


def test_tiny_thinking_budget_stops_thinking_and_an_answer_follows(setup):
    _, tokenizer = setup
    trajectories = play(setup, [Task("test/lookup-v0:easy", s, "low") for s in range(3)], budgets={"low": 1})
    for t in trajectories:
        assert t.episode.think_tokens <= t.episode.turns * 1
        # Every think block closes and something follows it in the turn.
        ids = t.tokens.tolist()
        for i, token in enumerate(ids):
            if token == tokenizer.think_start_id:
                close = ids.index(tokenizer.think_end_id, i)
                assert close - i - 1 <= 1 and ids[close + 1] != tokenizer.eot_id or close + 1 < len(ids)
