"""The README's "Add an environment" example, with mypkg spelled as this package."""
from jointrl.envs.base import Action, Env, EnvSpec, tool
from jointrl.envs import registry

class WordLength(Env):
    def _reset(self, seed):
        self.word = ["apple", "banana", "cherry"][seed % 3]
        return [{"role": "user", "content": f"How long is {self.word}? Use the tool."}]

    @tool("length of a word", {"type": "object", "properties": {"word": {"type": "string"}}, "required": ["word"]})
    def length(self, word):
        return str(len(word))

    def _signals(self):
        return {"success": float(self.final_answer == str(len(self.word)))}

    def _solution(self):
        yield Action("length", {"word": self.word}, reasoning="Ask the tool.")
        yield Action(None, answer=str(len(self.word)))

def register():  # pyproject: [project.entry-points."jointrl.envs"] wordlen = "mypkg.envs:register"
    registry.register(EnvSpec(id="toy/word-length-v0:easy", entry_point="jointrl_test_plugin.envs:WordLength"))
