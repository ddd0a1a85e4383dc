"""Text-rewrite family: edit files in place with sed-style rules (replace, rename identifiers, normalise configs)."""
from __future__ import annotations

import random
import re

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import File, Step, Task

FINISH = "a one-line summary of what you changed."


def _urls(rng: random.Random) -> Task:
    hosts = [f"{w}.example.{rng.choice(['com', 'org', 'net'])}" for w in vocab.words(rng, 6)]

    def config() -> str:
        """A config file of URL and number settings, some commented."""
        lines = []
        for key in vocab.words(rng, rng.randint(8, 14)):
            scheme = rng.choice(["http://", "http://", "https://"])
            if rng.random() < 0.6:
                lines.append(f"{key}_url = {scheme}{rng.choice(hosts)}/{rng.choice(vocab.WORDS)}")
            else:
                lines.append(f"{key} = {rng.randint(1, 999)}")
            if rng.random() < 0.2:
                lines.append(f"# see {rng.choice(['http://', 'https://'])}{rng.choice(hosts)}/docs")
        return "\n".join(lines) + "\n"

    app, legacy = config(), config()
    if "http://" not in app:
        app += f"mirror_url = http://{hosts[0]}/mirror\n"
    # Per-seed file names: a remembered sed line edits nothing on another seed.
    folder, name, other = vocab.words(rng, 3)
    target, kept = f"{folder}/{name}.conf", f"{folder}/{other}.conf"
    prompt = (f"In `{target}`, replace every `http://` with `https://` (comments included). "
              f"`{kept}` must stay exactly as it is.")
    steps = [
        # The path quoted as the question quotes it, so it is the same tokens in both (see count.py).
        Step(f"grep -n -- 'http://' '{target}'", "See the occurrences first."),
        Step(f"sed -i 's#http://#https://#g' '{target}' && grep -c -- 'http://' '{target}'",
             "A global substitution; the count should now be 0."),
    ]
    checks = [File(target, app.replace("http://", "https://"), match="exact"), File(kept, legacy, match="exact", keep=True)]
    return Task(prompt, FINISH, {target: app, kept: legacy}, steps, checks)


def _rename(rng: random.Random) -> Task:
    a, b, c = vocab.words(rng, 3)
    old, new = f"load_{a}", f"fetch_{b}"
    near = [f"{old}_cache", f"my_{old}", f"{old}s", f"{old}2", f"reload_{a}"]
    pattern = re.compile(rf"\b{old}\b")

    def source() -> str:
        """Python-like lines using the name and its look-alikes."""
        lines = []
        for _ in range(rng.randint(6, 12)):
            name = rng.choice([old, old, rng.choice(near), f"{c}_{rng.choice(vocab.WORDS)}"])
            kind = rng.random()
            if kind < 0.3:
                lines.append(f"def {name}(path):\n    return open(path).read()\n")
            elif kind < 0.7:
                lines.append(f"value = {name}('{rng.choice(vocab.WORDS)}.txt')  # calls {rng.choice([old] + near)}\n")
            else:
                lines.append(f"print(\"{name}: done\", {rng.choice(near)}({name}))\n")
        return "\n".join(lines)

    files = {f"src/{w}.py": source() for w in vocab.words(rng, rng.randint(3, 5))}
    untouched = {f"src/vendor/{rng.choice(vocab.WORDS)}.py": source(), "docs/api.md": f"Call `{old}(path)` to read a file.\n"}
    checks = [File(path, pattern.sub(new, text), match="exact", keep=pattern.search(text) is None) for path, text in files.items()]
    checks += [File(path, text, match="exact", keep=True) for path, text in untouched.items()]
    prompt = (
        f"Rename the function `{old}` to `{new}` in every `.py` file directly inside `src/` (not in `src/vendor/`, "
        f"not in `docs/`). Replace only the whole identifier `{old}`: names that merely contain it, such as "
        f"`{near[0]}` or `{near[1]}`, stay as they are. Calls, definitions, strings and comments all count."
    )
    steps = [
        Step(f"grep -rn '{old}' src docs | head -40", "See where the name and its look-alikes occur."),
        Step(f"sed -i 's/\\b{old}\\b/{new}/g' src/*.py && grep -c '\\b{new}\\b' src/*.py",
             "\\b anchors on word boundaries, so longer identifiers containing the name are left alone; the glob skips vendor/."),
    ]
    return Task(prompt, FINISH, {**files, **untouched}, steps, checks)


def normalise_ini(text: str, new_host: str) -> str:
    """The hard task's rules: drop comments and blank lines, tighten `key = value`, set host in [database]."""
    out, section = [], None
    for line in text.split("\n"):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        if stripped.startswith("["):
            section = stripped
            out.append(line)
            continue
        key, _, value = line.partition("=")
        key, value = key.rstrip(), value.lstrip()
        if section == "[database]" and key == "host":
            value = new_host
        out.append(f"{key}={value}")
    return "\n".join(out) + "\n"


def _ini(rng: random.Random) -> Task:
    sections = {"server": ["host", "port", "workers", "log_level"], "database": ["host", "port", "name", "user", "options"],
                "cache": ["host", "ttl", "size"]}
    new_host = f"db-{rng.choice(vocab.WORDS)}.internal"

    def ini() -> str:
        """An ini file with comments, blank lines and uneven spacing around '='."""
        lines = []
        for section in rng.sample(list(sections), rng.randint(2, 3)):
            lines.append(f"[{section}]")
            for key in sections[section]:
                if rng.random() < 0.3:
                    lines.append(rng.choice(["# " + vocab.sentence(rng), "; old value", "   # indented note", "", "   "]))
                value = rng.choice([str(rng.randint(1, 9000)), f"{rng.choice(vocab.WORDS)}.local", "a=1,b=2",
                                    rng.choice(vocab.WORDS)])
                lines.append(f"{key}{' ' * rng.randint(0, 2)}={' ' * rng.randint(0, 3)}{value}")
            lines.append("")
        return "\n".join(lines) + "\n"

    etc, backup = vocab.words(rng, 2)
    files = {f"{etc}/{w}.ini": ini() for w in vocab.words(rng, rng.randint(3, 4))}
    if not any("[database]" in t for t in files.values()):
        files[next(iter(files))] += "[database]\nhost = localhost\n"
    untouched = {f"{etc}/README.txt": "Edit the files with care.\n# not a comment to strip\nkey = value\n",
                 f"{etc}/{backup}/{rng.choice(vocab.WORDS)}.ini": ini()}
    after = {p: normalise_ini(t, new_host) for p, t in files.items()}
    checks = [File(p, after[p], match="exact", keep=after[p] == t) for p, t in files.items()]
    checks += [File(p, t, match="exact", keep=True) for p, t in untouched.items()]
    prompt = (
        f"Normalise every `.ini` file directly inside `{etc}/` (not `{etc}/{backup}/`, and no other files) by these rules:\n"
        "1. Delete comment lines (first non-blank character `#` or `;`) and lines that are empty or only blanks.\n"
        "2. In `key = value` lines remove the blanks around the first `=`, giving `key=value` (the value keeps any "
        "further `=`).\n"
        f"3. In the `[database]` section only, set the value of `host` to `{new_host}` (other sections' `host` keys stay).\n"
        "Section header lines stay as they are; everything else in each line is unchanged."
    )
    script = (
        "sed -i -E '/^[[:space:]]*([#;]|$)/d; s/^([^=]*[^=[:space:]])[[:space:]]*=[[:space:]]*/\\1=/; "
        f"/^\\[database\\]/,/^\\[/ s/^host=.*/host={new_host}/' {etc}/*.ini"
    )
    steps = [
        Step(f"ls -R {etc} && head -20 {etc}/*.ini", "Look at the layout and the files."),
        Step(script, "One sed program per file: delete comments and blanks, tighten the first '=', and change host "
                     "only between [database] and the next header (-i treats each file separately)."),
        Step(f"cat {etc}/*.ini", "Check the result."),
    ]
    return Task(prompt, FINISH, {**files, **untouched}, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: one global replacement; medium: whole-identifier rename across files; hard: three ini rules, section-scoped."""
    return {"easy": _urls, "medium": _rename, "hard": _ini}[difficulty](rng)
