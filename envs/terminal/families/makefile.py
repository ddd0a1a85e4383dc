"""Makefile family: fix or complete a Makefile so `make` builds exact targets and rebuilds them when sources change.

The checker builds from scratch in its own copy, then edits the sources and runs `make` again: targets
written by hand, or rules with wrong prerequisites, fail the second round.
"""
from __future__ import annotations

import random
import shlex

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import File, Run, Step, Task, write_command

FINISH = "a one-line summary of what you fixed."
NOTE = ("Do not edit anything under `src/`. Targets must be rebuilt by `make` when a source changes or a new "
        "`src/*.txt` appears, so write real rules rather than the outputs.")


def write_lines(path: str, lines: list[str]) -> str:
    """A bash command writing `lines` to `path`, with recipe tabs spelled as $'\\t'."""
    parts = []
    for line in lines:
        if line.startswith("\t"):
            parts.append("$'\\t'" + shlex.quote(line[1:]) if line[1:] else "$'\\t'")
        else:
            parts.append(shlex.quote(line) if line else "''")
    return f"printf '%s\\n' {' '.join(parts)} > {path}"


def _sources(rng: random.Random, count: int) -> dict[str, str]:
    return {f"src/{name}.txt": "".join(f"{rng.choice(vocab.WORDS)}\n" for _ in range(rng.randint(4, 9)))
            for name in vocab.words(rng, count)}


def _changed(rng: random.Random, sources: dict[str, str], skip: str | None, add_new: bool) -> dict[str, str]:
    """Verification's edit: new unseen words appended to one source (not `skip`), plus maybe a new source."""
    target = rng.choice([p for p in sorted(sources) if p != skip])
    fresh = [w for w in vocab.WORDS if all(w not in t for t in sources.values())]
    changed = {target: sources[target] + "".join(f"{w}\n" for w in rng.sample(fresh, 3))}
    if add_new:
        name = rng.choice([w for w in fresh if f"src/{w}.txt" not in sources])
        changed[f"src/{name}.txt"] = "".join(f"{w}\n" for w in rng.sample(fresh, 4))
    return changed


def _stages(sources: dict[str, str], changed: dict[str, str], outputs) -> list:
    """Keep checks on the sources, a clean build, then an incremental build after `changed` lands."""
    checks: list = [File(p, t, match="exact", keep=True) for p, t in sorted(sources.items())]
    checks.append(Run("rm -rf build && make", timeout=30))
    checks += [File(p, t) for p, t in outputs(sources).items()]
    # Everything is first dated back to one instant, so the edited sources are newer whatever the file system's
    # timestamp resolution, and targets whose real prerequisites did not change stay up to date.
    checks.append(Run("find . -exec touch -h -d @978307200 {} +\n" + write_command(changed) + "make", timeout=30))
    checks += [File(p, t) for p, t in outputs({**sources, **changed}).items()]
    return checks


def _tabs(rng: random.Random) -> Task:
    sources = _sources(rng, rng.randint(3, 5))

    def outputs(src: dict[str, str]) -> dict[str, str]:
        """The concatenation and its line count."""
        joined = "".join(src[p] for p in sorted(src))
        return {"build/all.txt": joined, "build/count.txt": f"{joined.count(chr(10))}\n"}

    broken = rng.choice(["all", "count"])
    indent = " " * rng.choice([4, 8])
    lines = [
        "SOURCES := $(sort $(wildcard src/*.txt))", "",
        "all: build/all.txt build/count.txt", "",
        "build/all.txt: $(SOURCES)",
        ("\t" if broken != "all" else indent) + "mkdir -p build",
        ("\t" if broken != "all" else indent) + "cat $(SOURCES) > $@", "",
        "build/count.txt: build/all.txt",
        ("\t" if broken != "count" else indent) + "wc -l < $< > $@", "",
        ".PHONY: all clean", "clean:", "\trm -rf build",
    ]
    prompt = ("`make` fails in this directory. Fix the `Makefile` so that `make` builds `build/all.txt` (all `src/*.txt` "
              "files concatenated in name order) and `build/count.txt` (the number of lines of `build/all.txt`, just the "
              f"number). {NOTE}")
    steps = [
        Step("make; cat -A Makefile", "See the error, and show tabs as ^I to compare the recipe lines."),
        Step(f"sed -i 's/^{indent}/\\t/' Makefile && make && cat build/count.txt",
             "Recipe lines must start with a tab; the spaces make a 'missing separator' error."),
    ]
    files = {**sources, "Makefile": "\n".join(lines) + "\n"}
    return Task(prompt, FINISH, files, steps, _stages(sources, _changed(rng, sources, None, add_new=False), outputs))


def _words_outputs(src: dict[str, str]) -> dict[str, str]:
    words = sorted({w for t in src.values() for w in t.split("\n") if w})
    text = "".join(f"{w}\n" for w in words)
    return {"build/words.txt": text, "build/count.txt": f"{len(words)}\n", "build/upper.txt": text.upper()}


def _prerequisites(rng: random.Random) -> Task:
    sources = _sources(rng, rng.randint(4, 6))
    first = sorted(sources)[0]
    lines = [
        "SOURCES := $(wildcard src/*.txt)", "",
        ".PHONY: all clean", "clean:", "\trm -rf build", "",
        "all: build/words.txt build/count.txt build/upper.txt", "",
        "build/words.txt: $(SOURCES)", "\tmkdir -p build", "\tLC_ALL=C sort -u $(SOURCES) > $@", "",
        f"build/count.txt: {first}", "\twc -l < build/words.txt > $@",
    ]
    fixed = [
        "SOURCES := $(wildcard src/*.txt)", "",
        ".PHONY: all clean", "all: build/words.txt build/count.txt build/upper.txt", "",
        "clean:", "\trm -rf build", "",
        "build/words.txt: $(SOURCES)", "\tmkdir -p build", "\tLC_ALL=C sort -u $(SOURCES) > $@", "",
        "build/count.txt: build/words.txt", "\twc -l < $< > $@", "",
        "build/upper.txt: build/words.txt", "\ttr a-z A-Z < $< > $@",
    ]
    prompt = (
        "Fix the `Makefile` so that running plain `make` builds all three targets and keeps them up to date:\n"
        "- `build/words.txt`: every distinct line of all `src/*.txt` files, sorted in byte order;\n"
        "- `build/count.txt`: the number of lines of `build/words.txt`, just the number;\n"
        "- `build/upper.txt`: `build/words.txt` in upper case.\n"
        f"The current Makefile has more than one problem. {NOTE}"
    )
    steps = [
        Step("cat Makefile; make; ls build", "Plain make runs the first rule, which is clean; and some rules are missing or wrong."),
        Step(write_lines("Makefile", fixed) + " && make && head -3 build/*.txt",
             "Put all first so it is the default goal, make count depend on words.txt, and add the missing upper rule."),
    ]
    files = {**sources, "Makefile": "\n".join(lines) + "\n"}
    return Task(prompt, FINISH, files, steps, _stages(sources, _changed(rng, sources, first, add_new=False), _words_outputs))


def _pattern_outputs(src: dict[str, str]) -> dict[str, str]:
    out, summary = {}, []
    for path in sorted(src):
        name = path[len("src/"):-len(".txt")]
        lines = src[path].splitlines()
        out[f"build/{name}.sorted"] = "".join(f"{w}\n" for w in sorted(lines))
        out[f"build/{name}.count"] = f"{len(lines)}\n"
        summary.append(f"{name} {len(lines)}\n")
    out["build/summary.txt"] = "".join(summary)
    return out


def _pattern(rng: random.Random) -> Task:
    sources = _sources(rng, rng.randint(3, 5))
    lines = [
        "SOURCES := $(sort $(wildcard src/*.txt))",
        "NAMES := $(patsubst src/%.txt,%,$(SOURCES))",
        "COUNTS := $(addprefix build/,$(addsuffix .count,$(NAMES)))", "",
        ".PHONY: all clean",
        "all: build/summary.txt", "",
        "# TODO: rules for build/NAME.sorted and build/NAME.count", "",
        "build/summary.txt: $(COUNTS)",
        "\tfor f in $(COUNTS); do echo \"$$(basename $$f .count) $$(cat $$f)\"; done > $@", "",
        "clean:", "\trm -rf build",
    ]
    fixed = [
        "SOURCES := $(sort $(wildcard src/*.txt))",
        "NAMES := $(patsubst src/%.txt,%,$(SOURCES))",
        "COUNTS := $(addprefix build/,$(addsuffix .count,$(NAMES)))",
        "SORTED := $(addprefix build/,$(addsuffix .sorted,$(NAMES)))", "",
        ".PHONY: all clean",
        "all: build/summary.txt $(SORTED)", "",
        "build/%.sorted: src/%.txt", "\t@mkdir -p build", "\tLC_ALL=C sort $< > $@", "",
        "build/%.count: src/%.txt", "\t@mkdir -p build", "\twc -l < $< > $@", "",
        "build/summary.txt: $(COUNTS)",
        "\tfor f in $(COUNTS); do echo \"$$(basename $$f .count) $$(cat $$f)\"; done > $@", "",
        "clean:", "\trm -rf build",
    ]
    prompt = (
        "Complete the `Makefile` so that plain `make` builds, for every `src/NAME.txt`:\n"
        "- `build/NAME.sorted`: its lines sorted in byte order (duplicates kept);\n"
        "- `build/NAME.count`: its number of lines, just the number;\n"
        "and `build/summary.txt`: one line `NAME COUNT` per source, in name order (the existing rule does this). "
        f"Use pattern rules so that new sources are picked up. {NOTE}"
    )
    steps = [
        Step("cat Makefile; ls src; make", "The rules for the per-source targets are missing."),
        Step(write_lines("Makefile", fixed) + " && make && cat build/summary.txt && ls build",
             "Add pattern rules for .sorted and .count and make all depend on every .sorted file too."),
    ]
    files = {**sources, "Makefile": "\n".join(lines) + "\n"}
    return Task(prompt, FINISH, files, steps, _stages(sources, _changed(rng, sources, None, add_new=True), _pattern_outputs))


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: fix tab indentation; medium: default goal, a wrong prerequisite, a missing rule; hard: write pattern rules."""
    return {"easy": _tabs, "medium": _prerequisites, "hard": _pattern}[difficulty](rng)
