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
    name = rng.choice(vocab.WORDS)
    version = f"{rng.randint(1, 4)}.{rng.randint(0, 9)}.{rng.randint(0, 9)}"
    top, archive = f"{name}-{version}", f"{rng.choice(vocab.WORDS)}-bundle.tar.gz"
    # The destination differs per seed, so a remembered extraction lands in the wrong place.
    dest = rng.choice([w for w in vocab.WORDS if w != name])
    files = _project(rng, top, rng.randint(6, 10), ["py", "md", "txt", "cfg"])
    expected = {f"{dest}/{path.split('/', 1)[1]}": data for path, data in files.items()}
    # Not opening on a backtick: at the text's start it merges with the name into tokens the command never has.
    prompt = (f"The archive `{archive}` holds a single top-level folder `{top}/`. Extract it so that the *contents* of "
              f"that folder end up directly in a new folder `{dest}/` (for example `{dest}/src/...`, not "
              f"`{dest}/{top}/src/...`).")
    steps = [
        # Names quoted as the question quotes them, so they are the same tokens in both (see count.py).
        Step(f"tar -tzf '{archive}' | head -30", "List the archive to see its layout."),
        Step(f"mkdir -p '{dest}' && tar -xzf '{archive}' -C '{dest}' --strip-components=1 && find '{dest}' -type f | sort",
             "--strip-components=1 drops the top-level folder from every path."),
    ]
    return Task(prompt, FINISH, {archive: make_tar(files, compress=True)}, steps, tree(dest, expected, {}))


def _create(rng: random.Random) -> Task:
    root, skipped = vocab.words(rng, 2)
    wanted_ext, near_ext = rng.choice([("py", "pyc"), ("sh", "shx"), ("js", "jsx"), ("c", "cc"), ("rb", "rbw")])
    archive = f"{rng.choice(vocab.WORDS)}-backup.tar.gz"
    files = _project(rng, root, rng.randint(12, 18), [wanted_ext, wanted_ext, "md", "txt", near_ext])
    for word in vocab.words(rng, 2):
        files[f"{root}/{skipped}/{word}.{wanted_ext}"] = f"# {word}\n{vocab.sentence(rng)}\n".encode()
    files[f"{root}/notes.{wanted_ext}.txt"] = b"not source\n"
    files[f"{root}/src/main.{wanted_ext}"] = b"main\n"
    wanted = {p: d for p, d in files.items() if p.endswith(f".{wanted_ext}") and not p.startswith(f"{root}/{skipped}/")}
    prompt = (f"Create `{archive}`, a gzip-compressed tar archive holding exactly the `.{wanted_ext}` files under `{root}/` "
              f"(any depth) except those under `{root}/{skipped}/`. Store them under their paths as seen from the current "
              f"directory (`{root}/...`). No other files may be in the archive (directory entries do not matter).")
    steps = [
        Step(f"find {root} -type f | sort", f"See every file, including near misses like .{near_ext} and .{wanted_ext}.txt."),
        Step(f"find {root} -type f -name '*.{wanted_ext}' -not -path '{root}/{skipped}/*' | sort | tar -czf {archive} -T - && "
             f"tar -tzf {archive}",
             "Select with find (which matches the exact suffix) and feed the list to tar with -T."),
    ]
    return Task(prompt, FINISH, files, steps, [Tar(archive, wanted)])


def _without_stale(members: dict[str, bytes], stale: tuple[str, ...]) -> dict[str, bytes]:
    return {k: v for k, v in members.items() if not k.endswith(stale)}


def _repack(rng: random.Random) -> Task:
    version = f"{rng.randint(2, 9)}.{rng.randint(0, 20)}"
    app, vendor, lib = vocab.words(rng, 3)
    stale = tuple(rng.sample([".bak", ".orig", ".old", ".rej"], 2))
    suffix = rng.choice(["-rc", "-beta", "-dev"])
    release, clean = f"{app}-{version}.tar.gz", f"{app}-{version}-clean.tar.gz"
    files = _project(rng, app, rng.randint(6, 9), ["py", "cfg", "md"])
    files[f"{app}/VERSION"] = f"{version}{suffix}\n".encode()
    for word in vocab.words(rng, rng.randint(2, 3)):
        files[f"{app}/{rng.choice(['', 'src/', 'docs/'])}{word}{rng.choice(stale)}"] = b"stale copy\n"
    libs = {f"{lib}/{w}.py": f"VALUE = {rng.randint(1, 99)}\n".encode() for w in vocab.words(rng, 4)}
    for word in vocab.words(rng, 2):
        libs[f"{lib}/{word}.py{rng.choice(stale)}"] = b"old\n"
    nested = f"{app}/{vendor}/{lib}.tar"
    files[nested] = make_tar(libs, compress=False)
    expected: dict = _without_stale(files, stale)
    expected[f"{app}/VERSION"] = f"{version}\n".encode()
    expected[nested] = _without_stale(libs, stale)
    prompt = (
        f"`{release}` holds a folder `{app}/`. Produce `{clean}` (gzip-compressed tar) with the same files "
        f"and paths (`{app}/...`) except that:\n"
        f"1. every file ending in `{stale[0]}` or `{stale[1]}` is left out — also inside the nested archive `{nested}`, "
        "which must stay an uncompressed tar at that path holding the rest of its files under the same names;\n"
        f"2. `{app}/VERSION` contains the single line `{version}` (the `{suffix}` suffix removed).\n"
        f"Leave `{release}` as it is."
    )
    steps = [
        Step(f"tar -tzf {release} && tar -xOzf {release} {nested} | tar -tf -", "List the outer and the nested archive."),
        Step(f"rm -rf work && mkdir -p work/libs && tar -xzf {release} -C work && tar -xf work/{nested} -C work/libs",
             "Unpack both levels into a scratch folder."),
        Step(f"find work \\( -name '*{stale[0]}' -o -name '*{stale[1]}' \\) -type f -delete && "
             f"printf '%s\\n' '{version}' > work/{app}/VERSION && (cd work/libs && tar -cf ../{nested} *)",
             "Drop the stale copies at both levels, fix VERSION, and rebuild the nested tar with the same member names."),
        Step(f"tar -czf {clean} -C work {app} && rm -rf work && tar -tzf {clean}",
             f"Pack {app}/ again from the scratch folder and clean up."),
    ]
    checks = [Tar(clean, expected), Tar(release, files, keep=True)]
    return Task(prompt, FINISH, {release: make_tar(files, compress=True)}, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: extract minus the top folder; medium: create from a filtered selection; hard: repack with a nested archive."""
    return {"easy": _extract, "medium": _create, "hard": _repack}[difficulty](rng)
