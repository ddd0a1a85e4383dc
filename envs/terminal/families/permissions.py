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
    folders = ["project", "project/bin", "project/etc", "project/etc/keys.pem.d", "project/src", "project/scripts"]
    files: dict[str, str] = {}
    for word in vocab.words(rng, rng.randint(14, 20)):
        ext = rng.choice(["sh", "sh", "key", "pem", "py", "txt", "conf"])
        files[f"{rng.choice(folders)}/{word}.{ext}"] = f"{word}\n"
    files["project/notes.sh.txt"] = "not a script\n"
    files["project/etc/keys.pem.d/readme.txt"] = "keys live here\n"
    initial = {p: rng.choice([0o644, 0o664, 0o640]) for p in files}
    dirs = _parents(files)
    dir_initial = {d: 0o755 for d in dirs}
    expected = {}
    for path, mode in initial.items():
        if path.endswith(".sh"):
            mode = 0o750
        elif path.endswith((".key", ".pem")):
            mode = 0o600
        expected[path] = mode
    prompt = (
        "Apply these permission rules under `project/` (any depth):\n"
        "- every file whose name ends in `.sh`: mode 750;\n"
        "- every file whose name ends in `.key` or `.pem`: mode 600;\n"
        "- every directory, `project/` itself included: mode 750.\n"
        "Every other file keeps its current mode. Note that the rules are about files' names, not folders'."
    )
    steps = [
        Step("find project -printf '%m %y %p\\n' | sort -k3", "List modes, types and paths."),
        Step("find project -type d -exec chmod 750 {} + && find project -type f -name '*.sh' -exec chmod 750 {} + && "
             "find project -type f \\( -name '*.key' -o -name '*.pem' \\) -exec chmod 600 {} +",
             "-type keeps the file rules off the keys.pem.d folder, and -name matches whole suffixes only."),
        Step("find project -printf '%m %y %p\\n' | sort -k3", "Check the result."),
    ]
    checks = mode_checks(initial, expected) + mode_checks(dir_initial, {d: 0o750 for d in dirs})
    return Task(prompt, FINISH, files, steps, checks, modes={**initial, **dir_initial})


def _by_content(rng: random.Random) -> Task:
    files: dict[str, str] = {}
    folders = ["shared", "shared/tools", "shared/docs", "shared/drop", "shared/private"]
    for word in vocab.words(rng, rng.randint(12, 16)):
        kind = rng.random()
        if kind < 0.35:
            text = f"#!/bin/sh\necho {word}\n"
        elif kind < 0.55:
            text = f"{word} report\nCONFIDENTIAL\n{vocab.sentence(rng)}\n"
        elif kind < 0.65:
            text = f"{word}: not CONFIDENTIAL\n# #!/bin/sh is only a shebang on the first line\n"
        else:
            text = f"{vocab.sentence(rng)}\n"
        files[f"{rng.choice(folders)}/{word}.{rng.choice(['txt', 'sh', 'md', 'dat'])}"] = text
    files["shared/drop/.keep"] = ""
    files["shared/private/.keep"] = ""
    initial = {p: rng.choice([0o644, 0o664, 0o666, 0o755, 0o775, 0o600, 0o640]) for p in files}
    expected = {}
    for path, mode in initial.items():
        mode &= ~0o022
        if files[path].startswith("#!"):
            mode |= 0o110
        if "CONFIDENTIAL" in files[path].split("\n"):
            mode = 0o600
        expected[path] = mode
    dirs = _parents(files)
    dir_initial = {d: 0o755 for d in dirs}
    dir_expected = {**dir_initial, "shared/drop": 0o1777, "shared/private": 0o700}
    prompt = (
        "Fix the permissions under `shared/` by applying these rules in order (later rules win):\n"
        "1. Every file (any depth): remove write permission for group and others; keep all other bits.\n"
        "2. Every file whose first line starts with `#!`: add execute permission for the owner and the group.\n"
        "3. Every file that has a line consisting of exactly `CONFIDENTIAL`: mode exactly 600.\n"
        "4. The directory `shared/drop`: writable by everyone with the sticky bit set (mode 1777); the directory "
        "`shared/private`: mode 700. Other directories keep their modes.\n"
        "Rules 1-3 are about files only, including hidden ones."
    )
    steps = [
        Step("find shared -printf '%m %y %p\\n' | sort -k3 && grep -rlx CONFIDENTIAL shared",
             "See the modes and which files are confidential."),
        Step("find shared -type f -exec chmod go-w {} + && "
             "find shared -type f -exec sh -c "
             "'for f; do [ \"$(head -c 2 \"$f\")\" = \"#!\" ] && chmod ug+x \"$f\"; done; true' sh {} + && "
             "grep -rlx --null CONFIDENTIAL shared | xargs -0 -r chmod 600",
             "Symbolic chmod keeps the other bits; only the first two bytes decide a shebang; -x matches whole lines."),
        Step("chmod 1777 shared/drop && chmod 700 shared/private && find shared -printf '%m %y %p\\n' | sort -k3",
             "Then the two directories, and check."),
    ]
    checks = mode_checks(initial, expected) + mode_checks(dir_initial, dir_expected)
    return Task(prompt, FINISH, files, steps, checks, modes={**initial, **dir_initial})


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: explicit octal modes; medium: name-pattern rules over a tree; hard: symbolic and content-based rules in order."""
    return {"easy": _explicit, "medium": _by_pattern, "hard": _by_content}[difficulty](rng)
