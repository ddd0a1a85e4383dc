"""Archive family: extract, create and repack tar/gzip archives with exactly the requested contents."""
from __future__ import annotations

import gzip
import io
import random
import tarfile

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Step, Tar, Task, tree

FINISH = "a one-line summary of what you did."


def make_tar(files: dict[str, bytes], compress: bool) -> bytes:
    """A deterministic tar archive (fixed times and owners), gzipped when asked."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as archive:
        directories = sorted({"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)})
        for name in directories:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, 1700000000
            archive.addfile(info)
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 1700000000
            archive.addfile(info, io.BytesIO(data))
    raw = buffer.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


def _project(rng: random.Random, root: str, count: int, extensions: list[str]) -> dict[str, bytes]:
    folders = ["", "src/", "src/util/", "docs/", "tests/"]
    files = {}
    for word in vocab.words(rng, count):
        folder = rng.choice(folders)
        files[f"{root}/{folder}{word}.{rng.choice(extensions)}"] = f"# {word}\n{vocab.sentence(rng)}\n".encode()
    return files


def _extract(rng: random.Random) -> Task:
    version = f"{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
    top = f"project-{version}"
    files = _project(rng, top, rng.randint(6, 10), ["py", "md", "txt", "cfg"])
    expected = {f"restored/{path.split('/', 1)[1]}": data for path, data in files.items()}
    prompt = (f"`bundle.tar.gz` holds a single top-level folder `{top}/`. Extract it so that the *contents* of that folder "
              f"end up directly in a new folder `restored/` (for example `restored/src/...`, not `restored/{top}/src/...`).")
    steps = [
        Step("tar -tzf bundle.tar.gz | head -30", "List the archive to see its layout."),
        Step("mkdir -p restored && tar -xzf bundle.tar.gz -C restored --strip-components=1 && find restored -type f | sort",
             "--strip-components=1 drops the top-level folder from every path."),
    ]
    return Task(prompt, FINISH, {"bundle.tar.gz": make_tar(files, compress=True)}, steps, tree("restored", expected, {}))


def _create(rng: random.Random) -> Task:
    files = _project(rng, "project", rng.randint(12, 18), ["py", "py", "md", "txt", "pyc"])
    for word in vocab.words(rng, 2):
        files[f"project/tests/test_{word}.py"] = f"def test_{word}():\n    assert True\n".encode()
    files["project/notes.py.txt"] = b"not python\n"
    files["project/src/main.py"] = b"print('main')\n"
    wanted = {p: d for p, d in files.items() if p.endswith(".py") and not p.startswith("project/tests/")}
    prompt = ("Create `backup.tar.gz`, a gzip-compressed tar archive holding exactly the `.py` files under `project/` "
              "(any depth) except those under `project/tests/`. Store them under their paths as seen from the current "
              "directory (`project/...`). No other files may be in the archive (directory entries do not matter).")
    steps = [
        Step("find project -type f | sort", "See every file, including near misses like .pyc and .py.txt."),
        Step("find project -type f -name '*.py' -not -path 'project/tests/*' | sort | tar -czf backup.tar.gz -T - && "
             "tar -tzf backup.tar.gz",
             "Select with find (which matches the exact suffix) and feed the list to tar with -T."),
    ]
    return Task(prompt, FINISH, files, steps, [Tar("backup.tar.gz", wanted)])


def _without_stale(members: dict[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in members.items() if not k.endswith((".bak", ".orig"))}


def _repack(rng: random.Random) -> Task:
    version = f"{rng.randint(2, 9)}.{rng.randint(0, 20)}"
    files = _project(rng, "app", rng.randint(6, 9), ["py", "cfg", "md"])
    files["app/VERSION"] = f"{version}-rc\n".encode()
    for word in vocab.words(rng, rng.randint(2, 3)):
        files[f"app/{rng.choice(['', 'src/', 'docs/'])}{word}.{rng.choice(['bak', 'orig'])}"] = b"stale copy\n"
    libs = {f"lib/{w}.py": f"VALUE = {rng.randint(1, 99)}\n".encode() for w in vocab.words(rng, 4)}
    for word in vocab.words(rng, 2):
        libs[f"lib/{word}.py.bak"] = b"old\n"
    files["app/vendor/libs.tar"] = make_tar(libs, compress=False)
    expected: dict = _without_stale(files)
    expected["app/VERSION"] = f"{version}\n".encode()
    expected["app/vendor/libs.tar"] = _without_stale(libs)
    prompt = (
        "`release.tar.gz` holds a folder `app/`. Produce `release-clean.tar.gz` (gzip-compressed tar) with the same files "
        "and paths (`app/...`) except that:\n"
        "1. every file ending in `.bak` or `.orig` is left out — also inside the nested archive `app/vendor/libs.tar`, "
        "which must stay an uncompressed tar at that path holding the rest of its files under the same names;\n"
        f"2. `app/VERSION` contains the single line `{version}` (the release-candidate suffix removed).\n"
        "Leave `release.tar.gz` as it is."
    )
    steps = [
        Step("tar -tzf release.tar.gz && tar -xOzf release.tar.gz app/vendor/libs.tar | tar -tf -",
             "List the outer and the nested archive."),
        Step("rm -rf work && mkdir -p work/libs && tar -xzf release.tar.gz -C work && tar -xf work/app/vendor/libs.tar -C work/libs",
             "Unpack both levels into a scratch folder."),
        Step("find work \\( -name '*.bak' -o -name '*.orig' \\) -type f -delete && "
             f"printf '%s\\n' '{version}' > work/app/VERSION && (cd work/libs && tar -cf ../app/vendor/libs.tar *)",
             "Drop the stale copies at both levels, fix VERSION, and rebuild the nested tar with the same member names."),
        Step("tar -czf release-clean.tar.gz -C work app && rm -rf work && tar -tzf release-clean.tar.gz",
             "Pack app/ again from the scratch folder and clean up."),
    ]
    checks = [Tar("release-clean.tar.gz", expected), Tar("release.tar.gz", files, keep=True)]
    return Task(prompt, FINISH, {"release.tar.gz": make_tar(files, compress=True)}, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: extract minus the top folder; medium: create from a filtered selection; hard: repack with a nested archive."""
    return {"easy": _extract, "medium": _create, "hard": _repack}[difficulty](rng)
