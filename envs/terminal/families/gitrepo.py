"""Git family: branch and commit, merge with tag and cleanup, and resolve a merge conflict by a stated rule.

The repository is built at reset from a `git fast-import` stream (one git process, fixed dates), and the
setup prints the commit ids the checks compare against. Checks resolve revisions with git itself in the
verifier's copy, where nothing the repository configures can run.
"""
from __future__ import annotations

import base64
import random
import shlex

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import File, Git, Missing, Step, Task

FINISH = "a one-line summary of what you did."
IDENTITY = "Your shell already has a git identity configured."
AUTHOR = "Repo Owner <owner@example.com>"
EPOCH = 1709287200  # 2024-03-01 10:00 UTC; each commit is a day later


class History:
    """A repository history written as a fast-import stream, plus the setup script that loads it."""

    def __init__(self):
        self.chunks: list[str] = []
        self.marks = 0
        self.tips: dict[str, int] = {}
        self.recorded: dict[str, str] = {}

    def commit(self, branch: str, message: str, files: dict[str, str], start: str | None = None) -> int:
        """Commit `files` on `branch` (continuing it, or starting it at branch `start`); returns the mark."""
        self.marks += 1
        lines = [f"commit refs/heads/{branch}", f"mark :{self.marks}",
                 f"committer {AUTHOR} {EPOCH + 86400 * self.marks} +0000", _data(message)]
        if start is not None:
            lines.append(f"from :{self.tips[start]}")
        for path, text in files.items():
            lines += [f"M 100644 inline {path}", _data(text)]
        self.chunks.append("\n".join(lines) + "\n")
        self.tips[branch] = self.marks
        return self.marks

    def branch(self, name: str, mark: int) -> None:
        """Point a new branch at an earlier commit."""
        self.chunks.append(f"reset refs/heads/{name}\nfrom :{mark}\n\n")
        self.tips[name] = mark

    def record(self, name: str, branch: str) -> None:
        """Have the setup print `name=<id of branch's tip now>`."""
        self.recorded[name] = f":{self.tips[branch]}"

    def setup(self) -> str:
        """The reset script: init, import the stream (inlined as base64), check out main, print the recorded ids."""
        stream = base64.b64encode("".join(self.chunks).encode()).decode()
        # One pack: below fastimport.unpackLimit a small import would become a directory per object, slow to copy.
        lines = ["set -e", "git init -q -b main --template= repo", "cd repo",
                 f"printf %s {stream} | base64 -d | git -c fastimport.unpackLimit=1 fast-import --quiet --export-marks=/tmp/marks",
                 "git reset -q --hard main"]
        lines += [f"sed -n 's/^{mark} /{name}=/p' /tmp/marks" for name, mark in self.recorded.items()]
        return "\n".join(lines) + "\n"


def _data(text: str) -> str:
    return f"data {len(text.encode())}\n{text}"


def _base(rng: random.Random, history: History) -> list[str]:
    """A few commits on main; returns the source file names."""
    names = vocab.words(rng, 3)
    history.commit("main", "Initial commit", {"README.md": f"# {names[0]}\n\n{vocab.sentence(rng)}\n"})
    for name in names:
        history.commit("main", f"Add {name}", {f"src/{name}.txt": f"{vocab.sentence(rng)}\n{vocab.sentence(rng)}\n"})
    return names


def _branch(rng: random.Random) -> Task:
    history = History()
    _base(rng, history)
    history.record("main", "main")
    # Branch, folder and file names are drawn separately, so a prompt (or a remembered commit) rarely repeats.
    word, topic, folder = vocab.words(rng, 3)
    branch, line = f"{rng.choice(['feature', 'topic', 'docs'])}/{word}-{topic}", vocab.sentence(rng)
    path, message = f"{folder}/{word}.txt", f"Add notes on {word} {topic}"
    prompt = (f"`repo/` is a git repository. Create a branch `{branch}` starting at `main`, and on it commit one new file "
              f"`{path}` containing the single line `{line}` with the commit message `{message}`. `main` itself must not "
              f"change, and the commit must change nothing else. {IDENTITY}")
    steps = [
        Step("cd repo && git status && git log --oneline --all", "Look at the repository first."),
        Step(f"git switch -c {branch} main && mkdir -p {folder} && printf '%s\\n' {shlex.quote(line)} > {path} && "
             f"git add {path} && git commit -q -m {shlex.quote(message)} && git log --oneline -3 --stat",
             "Branch from main, add the file, commit it with the message."),
    ]
    tip = f"refs/heads/{branch}"
    checks = [
        Git("refs/heads/main", recorded="main", keep=True),
        Git(f"{tip}^", recorded="main"),
        Git(tip, subject=message),
        Git(f"{tip}:{path}", content=line),
        # The commit's tree is main's plus the one new file.
        Git(f"{tip}:", entries=tuple(sorted(("README.md", folder, "src")))),
        Git(f"{tip}:{folder}", entries=(f"{word}.txt",)),
        Git(f"{tip}:src", same_as="refs/heads/main:src"),
        Git(f"{tip}:README.md", same_as="refs/heads/main:README.md"),
    ]
    return Task(prompt, FINISH, {}, steps, checks, setup=history.setup())


def _merge(rng: random.Random) -> Task:
    history = History()
    names = _base(rng, history)
    feature, old = f"feature/{rng.choice(vocab.WORDS)}", f"old/{rng.choice(vocab.WORDS)}"
    tag = f"v{rng.randint(1, 5)}.{rng.randint(0, 9)}"
    history.branch(old, history.tips["main"] - 1)
    feature_file, feature_text = f"src/{names[0]}_extra.txt", f"{vocab.sentence(rng)}\n"
    changed_file, changed_text = f"src/{names[1]}.txt", f"{vocab.sentence(rng)}\n"
    history.commit(feature, f"Add extra {names[0]}", {feature_file: feature_text}, start="main")
    history.commit(feature, f"Rewrite {names[1]}", {changed_file: changed_text})
    history.commit(old, "Try something", {f"src/{names[2]}.txt": "experiment\n"})
    main_file, main_text = f"docs/{names[2]}.md", f"{vocab.sentence(rng)}\n"
    history.commit("main", f"Document {names[2]}", {main_file: main_text})
    history.record("main", "main")
    history.record("feature", feature)
    prompt = (
        f"`repo/` is a git repository. 1) Merge branch `{feature}` into `main` with a merge commit (do not rebase or "
        f"squash; `main` has moved on since the branch was made). 2) Tag the resulting `main` commit `{tag}`. "
        f"3) Delete the branch `{old}`, an abandoned experiment. Leave `{feature}` itself as it is. {IDENTITY}"
    )
    steps = [
        Step("cd repo && git log --oneline --graph --all", "See how the branches diverge."),
        Step(f"git switch -q main && git merge --no-ff -m {shlex.quote(f'Merge {feature}')} {feature} && git tag {tag} && "
             f"git branch -D {old} && git log --oneline --graph --all -8",
             "Merge with a merge commit, tag it, and force-delete the unmerged experiment."),
    ]
    checks = [
        Git("refs/heads/main^1", recorded="main"),
        Git("refs/heads/main^2", recorded="feature"),
        Git(f"refs/heads/main:{feature_file}", content=feature_text),
        Git(f"refs/heads/main:{changed_file}", content=changed_text),
        Git(f"refs/heads/main:{main_file}", content=main_text, keep=True),
        Git(f"refs/tags/{tag}^{{commit}}", same_as="refs/heads/main"),
        Git(f"refs/heads/{old}", missing=True),
        Git(f"refs/heads/{feature}", recorded="feature", keep=True),
    ]
    return Task(prompt, FINISH, {}, steps, checks, setup=history.setup())


def resolve_settings(base: dict[str, str], ours: dict[str, str], theirs: dict[str, str], main_wins: str) -> dict[str, str]:
    """Per key: a value changed on one side wins; changed on both, the feature side wins except `main_wins`."""
    out = {}
    for key, value in base.items():
        mine, other = ours[key] != value, theirs[key] != value
        if mine and other:
            out[key] = ours[key] if key == main_wins else theirs[key]
        else:
            out[key] = ours[key] if mine else theirs[key]
    return out


def _ini(values: dict[str, str]) -> str:
    return "[app]\n" + "".join(f"{k} = {v}\n" for k, v in values.items())


def _conflict(rng: random.Random) -> Task:
    history = History()
    _base(rng, history)
    keys = vocab.words(rng, 8)
    # The key that keeps main's value, the file and the branch differ per seed: no remembered resolution fits another.
    main_wins = keys[0]
    rng.shuffle(keys)
    base = {k: str(rng.randint(1, 500)) for k in keys}
    others = [k for k in keys if k != main_wins]
    ours, theirs = dict(base), dict(base)
    # Three keys change on both sides, two more on each side alone.
    for key in [main_wins, others[0], others[1]] + rng.sample(others[2:], 2):
        ours[key] = str(int(base[key]) + rng.randint(1, 50))
    for key in [main_wins, others[0], others[1]] + rng.sample(others[2:], 2):
        theirs[key] = str(int(base[key]) + rng.randint(51, 99))
    settings = f"config/{rng.choice(vocab.WORDS)}.ini"
    history.commit("main", "Add settings", {settings: _ini(base)})
    feature = f"{rng.choice(['feature', 'tune', 'ops'])}/{rng.choice(vocab.WORDS)}"
    doc, doc_text = f"docs/{rng.choice(vocab.WORDS)}.md", f"{vocab.sentence(rng)}\n"
    history.commit(feature, "Tune settings and document them", {settings: _ini(theirs), doc: doc_text}, start="main")
    history.commit("main", "Adjust settings for production", {settings: _ini(ours)})
    history.record("main", "main")
    history.record("feature", feature)
    resolved = _ini(resolve_settings(base, ours, theirs, main_wins))
    prompt = (
        f"`repo/` is a git repository. Merge branch `{feature}` into `main`. Both sides changed `{settings}`, so "
        "the merge conflicts. Resolve it key by key: a key changed on only one side takes that side's value; a key "
        f"changed on both sides takes the value from `{feature}`, except `{main_wins}`, which keeps `main`'s value. Keep the "
        "file's layout (`key = value`, same key order), leave no conflict markers, and finish the merge so `main` ends "
        f"on a merge commit of both branches with a clean working tree. {IDENTITY}"
    )
    resolved_lines = " ".join(shlex.quote(line) for line in resolved.splitlines())
    base_ref = f"$(git merge-base main {feature})"
    steps = [
        Step("cd repo && git log --oneline --graph --all", "See both branches."),
        Step(f"git diff {base_ref} main -- {settings}; git diff {base_ref} {feature} -- {settings}",
             "Which keys each side changed relative to the merge base."),
        Step(f"git merge {feature}; git status --short", "Start the merge; it stops on the conflict."),
        Step(f"printf '%s\\n' {resolved_lines} > {settings} && cat {settings}",
             f"Write the resolution: one-sided changes kept, both-sided ones from the feature branch, {main_wins} from main."),
        Step(f"git add {settings} && git commit -q --no-edit && git status --short && git log --oneline --graph -4",
             "Conclude the merge commit and check the tree is clean."),
    ]
    checks = [
        Git("refs/heads/main^1", recorded="main"),
        Git("refs/heads/main^2", recorded="feature"),
        Git(f"refs/heads/main:{settings}", content=resolved),
        Git(f"refs/heads/main:{doc}", content=doc_text),
        Missing("repo/.git/MERGE_HEAD", keep=True),
        File(f"repo/{settings}", resolved, match="exact"),
        File(f"repo/{doc}", doc_text, match="exact"),
    ]
    return Task(prompt, FINISH, {}, steps, checks, setup=history.setup())


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: branch and commit; medium: merge commit, tag, branch deletion; hard: resolve a conflict by a per-key rule."""
    return {"easy": _branch, "medium": _merge, "hard": _conflict}[difficulty](rng)
