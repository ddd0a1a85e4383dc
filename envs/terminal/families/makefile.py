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
NOTE = ("Do not edit anything under its `src/`. Targets must be rebuilt by `make` when a source changes or a new "
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


def _stages(project: str, out: str, sources: dict[str, str], changed: dict[str, str], outputs) -> list:
    """Keep checks on the sources, a clean build, then an incremental build after `changed` lands (paths in `project`)."""
    checks: list = [File(f"{project}/{p}", t, match="exact", keep=True) for p, t in sorted(sources.items())]
    checks.append(Run(f"cd {project} && rm -rf {out} && make", timeout=30))
    checks += [File(f"{project}/{p}", t) for p, t in outputs(sources).items()]
    # Everything is first dated back to one instant, so the edited sources are newer whatever the file system's
    # timestamp resolution, and targets whose real prerequisites did not change stay up to date.
    checks.append(Run(f"cd {project} || exit 1\nfind . -exec touch -h -d @978307200 {{}} +\n" + write_command(changed) + "make",
                      timeout=30))
    checks += [File(f"{project}/{p}", t) for p, t in outputs({**sources, **changed}).items()]
    return checks


def _layout(rng: random.Random) -> tuple[str, str, list[str]]:
    """A per-seed project folder, output folder and output names, so remembered fixes and outputs fit no other seed."""
    project = f"{rng.choice(vocab.WORDS)}-{rng.choice(['app', 'tool', 'site', 'lib', 'docs'])}"
    out = rng.choice(["build", "out", "gen", "dist"])
    return project, out, vocab.words(rng, 3)


def _files(project: str, sources: dict[str, str], makefile: list[str]) -> dict[str, str]:
    return {**{f"{project}/{p}": t for p, t in sources.items()}, f"{project}/Makefile": "\n".join(makefile) + "\n"}


def _tabs(rng: random.Random) -> Task:
    project, out, (joined_name, count_name, _) = _layout(rng)
    sources = _sources(rng, rng.randint(3, 5))
    joined_path, count_path = f"{out}/{joined_name}.txt", f"{out}/{count_name}.count"

    def outputs(src: dict[str, str]) -> dict[str, str]:
        """The concatenation and its line count."""
        joined = "".join(src[p] for p in sorted(src))
        return {joined_path: joined, count_path: f"{joined.count(chr(10))}\n"}

    broken = rng.choice(["all", "count"])
    indent = " " * rng.choice([4, 8])
    lines = [
        "SOURCES := $(sort $(wildcard src/*.txt))", "",
        f"all: {joined_path} {count_path}", "",
        f"{joined_path}: $(SOURCES)",
        ("\t" if broken != "all" else indent) + f"mkdir -p {out}",
        ("\t" if broken != "all" else indent) + "cat $(SOURCES) > $@", "",
        f"{count_path}: {joined_path}",
        ("\t" if broken != "count" else indent) + "wc -l < $< > $@", "",
        ".PHONY: all clean", "clean:", f"\trm -rf {out}",
    ]
    prompt = (f"`make` fails in `{project}/`. Fix `{project}/Makefile` so that `make` run there builds `{joined_path}` (all "
              f"`src/*.txt` files concatenated in name order) and `{count_path}` (the number of lines of `{joined_path}`, "
              f"just the number). {NOTE}")
    steps = [
        Step(f"cd {project} && make; cat -A Makefile", "See the error, and show tabs as ^I to compare the recipe lines."),
        Step(f"sed -i 's/^{indent}/\\t/' Makefile && make && cat {count_path}",
             "Recipe lines must start with a tab; the spaces make a 'missing separator' error."),
    ]
    changed = _changed(rng, sources, None, add_new=False)
    return Task(prompt, FINISH, _files(project, sources, lines), steps, _stages(project, out, sources, changed, outputs))


def _prerequisites(rng: random.Random) -> Task:
    project, out, (words_name, count_name, upper_name) = _layout(rng)
    sources = _sources(rng, rng.randint(4, 6))
    first = sorted(sources)[0]
    words_path, count_path, upper_path = f"{out}/{words_name}.txt", f"{out}/{count_name}.count", f"{out}/{upper_name}.txt"

    def outputs(src: dict[str, str]) -> dict[str, str]:
        """The distinct sorted lines, their count, and the upper-cased copy."""
        words = sorted({w for t in src.values() for w in t.split("\n") if w})
        text = "".join(f"{w}\n" for w in words)
        return {words_path: text, count_path: f"{len(words)}\n", upper_path: text.upper()}

    lines = [
        "SOURCES := $(wildcard src/*.txt)", "",
        ".PHONY: all clean", "clean:", f"\trm -rf {out}", "",
        f"all: {words_path} {count_path} {upper_path}", "",
        f"{words_path}: $(SOURCES)", f"\tmkdir -p {out}", "\tLC_ALL=C sort -u $(SOURCES) > $@", "",
        f"{count_path}: {first}", f"\twc -l < {words_path} > $@",
    ]
    fixed = [
        "SOURCES := $(wildcard src/*.txt)", "",
        ".PHONY: all clean", f"all: {words_path} {count_path} {upper_path}", "",
        "clean:", f"\trm -rf {out}", "",
        f"{words_path}: $(SOURCES)", f"\tmkdir -p {out}", "\tLC_ALL=C sort -u $(SOURCES) > $@", "",
        f"{count_path}: {words_path}", "\twc -l < $< > $@", "",
        f"{upper_path}: {words_path}", "\ttr a-z A-Z < $< > $@",
    ]
    prompt = (
        f"Fix `{project}/Makefile` so that running plain `make` in `{project}/` builds all three targets and keeps them "
        "up to date:\n"
        f"- `{words_path}`: every distinct line of all `src/*.txt` files, sorted in byte order;\n"
        f"- `{count_path}`: the number of lines of `{words_path}`, just the number;\n"
        f"- `{upper_path}`: `{words_path}` in upper case.\n"
        f"The current Makefile has more than one problem. {NOTE}"
    )
    steps = [
        Step(f"cd {project} && cat Makefile; make; ls {out}",
             "Plain make runs the first rule, which is clean; and some rules are missing or wrong."),
        Step(write_lines("Makefile", fixed) + f" && make && head -3 {out}/*",
             "Put all first so it is the default goal, make count depend on the word list, and add the missing upper rule."),
    ]
    changed = _changed(rng, sources, first, add_new=False)
    return Task(prompt, FINISH, _files(project, sources, lines), steps, _stages(project, out, sources, changed, outputs))


def _pattern(rng: random.Random) -> Task:
    project, out, (summary_name, sorted_ext, count_ext) = _layout(rng)
    sources = _sources(rng, rng.randint(3, 5))
    summary = f"{out}/{summary_name}.txt"

    def outputs(src: dict[str, str]) -> dict[str, str]:
        """Per source its sorted lines and its line count, and the summary of the counts."""
        files, lines_of = {}, []
        for path in sorted(src):
            name = path[len("src/"):-len(".txt")]
            lines = src[path].splitlines()
            files[f"{out}/{name}.{sorted_ext}"] = "".join(f"{w}\n" for w in sorted(lines))
            files[f"{out}/{name}.{count_ext}"] = f"{len(lines)}\n"
            lines_of.append(f"{name} {len(lines)}\n")
        files[summary] = "".join(lines_of)
        return files

    head = [
        "SOURCES := $(sort $(wildcard src/*.txt))",
        "NAMES := $(patsubst src/%.txt,%,$(SOURCES))",
        f"COUNTS := $(addprefix {out}/,$(addsuffix .{count_ext},$(NAMES)))",
    ]
    tail = [
        f"{summary}: $(COUNTS)",
        f"\tfor f in $(COUNTS); do echo \"$$(basename $$f .{count_ext}) $$(cat $$f)\"; done > $@", "",
        "clean:", f"\trm -rf {out}",
    ]
    lines = head + ["", ".PHONY: all clean", f"all: {summary}", "",
                    f"# TODO: rules for {out}/NAME.{sorted_ext} and {out}/NAME.{count_ext}", ""] + tail
    fixed = head + [f"SORTED := $(addprefix {out}/,$(addsuffix .{sorted_ext},$(NAMES)))", "",
                    ".PHONY: all clean", f"all: {summary} $(SORTED)", "",
                    f"{out}/%.{sorted_ext}: src/%.txt", f"\t@mkdir -p {out}", "\tLC_ALL=C sort $< > $@", "",
                    f"{out}/%.{count_ext}: src/%.txt", f"\t@mkdir -p {out}", "\twc -l < $< > $@", ""] + tail
    prompt = (
        f"Complete `{project}/Makefile` so that plain `make` in `{project}/` builds, for every `src/NAME.txt`:\n"
        f"- `{out}/NAME.{sorted_ext}`: its lines sorted in byte order (duplicates kept);\n"
        f"- `{out}/NAME.{count_ext}`: its number of lines, just the number;\n"
        f"and `{summary}`: one line `NAME COUNT` per source, in name order (the existing rule does this). "
        f"Use pattern rules so that new sources are picked up. {NOTE}"
    )
    steps = [
        Step(f"cd {project} && cat Makefile; ls src; make", "The rules for the per-source targets are missing."),
        Step(write_lines("Makefile", fixed) + f" && make && cat {summary} && ls {out}",
             f"Add pattern rules for .{sorted_ext} and .{count_ext} and make all depend on every .{sorted_ext} file too."),
    ]
    changed = _changed(rng, sources, None, add_new=True)
    return Task(prompt, FINISH, _files(project, sources, lines), steps, _stages(project, out, sources, changed, outputs))


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: fix tab indentation; medium: default goal, a wrong prerequisite, a missing rule; hard: write pattern rules."""
    return {"easy": _tabs, "medium": _prerequisites, "hard": _pattern}[difficulty](rng)
