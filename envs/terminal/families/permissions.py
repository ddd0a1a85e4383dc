"""Permissions family: set mode bits as specified, by explicit value, by name pattern, or by content rules."""
from __future__ import annotations

import random

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Mode, Step, Task

FINISH = "a one-line summary of what you changed."


def mode_checks(initial: dict[str, int], expected: dict[str, int]) -> list[Mode]:
    """A goal check for every mode that must change and a keep check for every one that must not."""
    return [Mode(path, mode, keep=initial[path] == mode) for path, mode in sorted(expected.items())]


def _parents(paths) -> list[str]:
    return sorted({"/".join(p.split("/")[:i]) for p in paths for i in range(1, p.count("/") + 1)})


def _explicit(rng: random.Random) -> Task:
    candidates = {"bin/deploy.sh": "#!/bin/sh\necho deploying\n", "bin/backup.sh": "#!/bin/sh\necho backup\n",
                  "secrets/api.key": f"{rng.getrandbits(64):016x}\n", "secrets/db.pem": "-----KEY-----\n",
                  "README.md": "Read me.\n", "data/report.csv": "a,b\n1,2\n", "logs/app.log": "started\n",
                  "share/public.txt": "hello\n"}
    files = dict(candidates)
    initial = {p: 0o644 for p in files}
    targets = rng.sample(sorted(files), rng.randint(3, 4))
    expected = dict(initial)
    for path in targets:
        expected[path] = rng.choice([m for m in (0o755, 0o700, 0o600, 0o640, 0o444, 0o750, 0o711) if m != 0o644])
    modes = {**initial, **{d: 0o755 for d in _parents(files)}}
    listing = "\n".join(f"- `{p}`: {expected[p]:o}" for p in targets)
    prompt = f"Set these permission modes (octal) exactly, and change no other file's mode:\n{listing}"
    steps = [
        Step("ls -lR", "See the current modes."),
        Step(" && ".join(f"chmod {expected[p]:o} {p}" for p in targets) + " && ls -l " + " ".join(targets),
             "chmod with the octal values sets the bits exactly."),
    ]
    return Task(prompt, FINISH, files, steps, mode_checks(initial, expected), modes=modes)


def _by_pattern(rng: random.Random) -> Task:
    # The root, the suffixes and the modes change per seed, so a remembered chmod sequence is wrong elsewhere.
    root, keys_dir = vocab.words(rng, 2)
    script_ext = rng.choice(["sh", "pl", "rb", "bash"])
    key_exts = rng.sample(["key", "pem", "crt", "p12"], 2)
    script_mode, key_mode = rng.choice([0o750, 0o755, 0o700, 0o775]), rng.choice([0o600, 0o400, 0o440])
    dir_mode = rng.choice([0o750, 0o700, 0o711, 0o770])
    folders = [root, f"{root}/bin", f"{root}/etc", f"{root}/etc/{keys_dir}.{key_exts[0]}.d", f"{root}/src", f"{root}/scripts"]
    files: dict[str, str] = {}
    for word in vocab.words(rng, rng.randint(14, 20)):
        ext = rng.choice([script_ext, script_ext, *key_exts, "py", "txt", "conf"])
        files[f"{rng.choice(folders)}/{word}.{ext}"] = f"{word}\n"
    files[f"{root}/notes.{script_ext}.txt"] = "not a script\n"
    files[f"{folders[3]}/readme.txt"] = "keys live here\n"
    initial = {p: rng.choice([0o644, 0o664, 0o640]) for p in files}
    dirs = _parents(files)
    dir_initial = {d: 0o755 for d in dirs}
    expected = {}
    for path, mode in initial.items():
        if path.endswith(f".{script_ext}"):
            mode = script_mode
        elif path.endswith(tuple(f".{e}" for e in key_exts)):
            mode = key_mode
        expected[path] = mode
    prompt = (
        f"Apply these permission rules under `{root}/` (any depth):\n"
        f"- every file whose name ends in `.{script_ext}`: mode {script_mode:o};\n"
        f"- every file whose name ends in `.{key_exts[0]}` or `.{key_exts[1]}`: mode {key_mode:o};\n"
        f"- every directory, `{root}/` itself included: mode {dir_mode:o}.\n"
        "Every other file keeps its current mode. Note that the rules are about files' names, not folders'."
    )
    steps = [
        Step(f"find {root} -printf '%m %y %p\\n' | sort -k3", "List modes, types and paths."),
        Step(f"find {root} -type d -exec chmod {dir_mode:o} {{}} + && "
             f"find {root} -type f -name '*.{script_ext}' -exec chmod {script_mode:o} {{}} + && "
             f"find {root} -type f \\( -name '*.{key_exts[0]}' -o -name '*.{key_exts[1]}' \\) -exec chmod {key_mode:o} {{}} +",
             f"-type keeps the file rules off the {keys_dir}.{key_exts[0]}.d folder, and -name matches whole suffixes only."),
        Step(f"find {root} -printf '%m %y %p\\n' | sort -k3", "Check the result."),
    ]
    checks = mode_checks(initial, expected) + mode_checks(dir_initial, {d: dir_mode for d in dirs})
    return Task(prompt, FINISH, files, steps, checks, modes={**initial, **dir_initial})


MARKERS = ("CONFIDENTIAL", "SECRET", "INTERNAL", "RESTRICTED")


def _by_content(rng: random.Random) -> Task:
    root, drop, private = vocab.words(rng, 3)
    marker, marker_mode = rng.choice(MARKERS), rng.choice([0o600, 0o400, 0o640])
    files: dict[str, str] = {}
    folders = [root, f"{root}/tools", f"{root}/docs", f"{root}/{drop}", f"{root}/{private}"]
    for word in vocab.words(rng, rng.randint(12, 16)):
        kind = rng.random()
        if kind < 0.35:
            text = f"#!/bin/sh\necho {word}\n"
        elif kind < 0.55:
            text = f"{word} report\n{marker}\n{vocab.sentence(rng)}\n"
        elif kind < 0.65:
            text = f"{word}: not {marker}\n# #!/bin/sh is only a shebang on the first line\n"
        else:
            text = f"{vocab.sentence(rng)}\n"
        files[f"{rng.choice(folders)}/{word}.{rng.choice(['txt', 'sh', 'md', 'dat'])}"] = text
    files[f"{root}/{drop}/.keep"] = ""
    files[f"{root}/{private}/.keep"] = ""
    initial = {p: rng.choice([0o644, 0o664, 0o666, 0o755, 0o775, 0o600, 0o640]) for p in files}
    expected = {}
    for path, mode in initial.items():
        mode &= ~0o022
        if files[path].startswith("#!"):
            mode |= 0o110
        if marker in files[path].split("\n"):
            mode = marker_mode
        expected[path] = mode
    dirs = _parents(files)
    dir_initial = {d: 0o755 for d in dirs}
    dir_expected = {**dir_initial, f"{root}/{drop}": 0o1777, f"{root}/{private}": 0o700}
    prompt = (
        f"Fix the permissions under `{root}/` by applying these rules in order (later rules win):\n"
        "1. Every file (any depth): remove write permission for group and others; keep all other bits.\n"
        "2. Every file whose first line starts with `#!`: add execute permission for the owner and the group.\n"
        f"3. Every file that has a line consisting of exactly `{marker}`: mode exactly {marker_mode:o}.\n"
        f"4. The directory `{root}/{drop}`: writable by everyone with the sticky bit set (mode 1777); the directory "
        f"`{root}/{private}`: mode 700. Other directories keep their modes.\n"
        "Rules 1-3 are about files only, including hidden ones."
    )
    steps = [
        Step(f"find {root} -printf '%m %y %p\\n' | sort -k3 && grep -rlx {marker} {root}",
             f"See the modes and which files are marked {marker}."),
        Step(f"find {root} -type f -exec chmod go-w {{}} + && "
             f"find {root} -type f -exec sh -c "
             "'for f; do [ \"$(head -c 2 \"$f\")\" = \"#!\" ] && chmod ug+x \"$f\"; done; true' sh {} + && "
             f"grep -rlx --null {marker} {root} | xargs -0 -r chmod {marker_mode:o}",
             "Symbolic chmod keeps the other bits; only the first two bytes decide a shebang; -x matches whole lines."),
        Step(f"chmod 1777 {root}/{drop} && chmod 700 {root}/{private} && find {root} -printf '%m %y %p\\n' | sort -k3",
             "Then the two directories, and check."),
    ]
    checks = mode_checks(initial, expected) + mode_checks(dir_initial, dir_expected)
    return Task(prompt, FINISH, files, steps, checks, modes={**initial, **dir_initial})


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: explicit octal modes; medium: name-pattern rules over a tree; hard: symbolic and content-based rules in order."""
    return {"easy": _explicit, "medium": _by_pattern, "hard": _by_content}[difficulty](rng)
