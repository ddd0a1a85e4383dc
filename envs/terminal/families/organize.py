"""Files family: sort, rename and prune files by stated rules (by type, by date in the name, duplicates)."""
from __future__ import annotations

import random

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Step, Task, tree

FINISH = "a one-line summary of what you did."


def _by_type(rng: random.Random) -> Task:
    groups = {"images": ("jpg", "png"), "docs": ("txt", "md")}
    others = ("csv", "log")
    names = vocab.words(rng, 14)
    files, moved, stays = {}, {}, {}
    # Every extension appears at least once, so each glob in the rules matches something.
    kinds = ["jpg", "png", "txt", "md", "csv", "log"]
    extensions = kinds + [rng.choice(kinds) for _ in range(rng.randint(3, 6))]
    for name, ext in zip(names, extensions):
        content = f"{vocab.sentence(rng)}\n"
        files[f"inbox/{name}.{ext}"] = content
        target = next((folder for folder, exts in groups.items() if ext in exts), None)
        if target:
            moved[f"{target}/{name}.{ext}"] = content
        else:
            stays[f"inbox/{name}.{ext}"] = content
    prompt = (
        "The folder `inbox/` is a mess. Move every `.jpg` and `.png` file from `inbox/` into a new folder "
        "`images/`, and every `.txt` and `.md` file into a new folder `docs/`, keeping the file names. "
        f"Leave the other files ({', '.join('.' + e for e in others)}) where they are."
    )
    steps = [
        Step("ls inbox", "First see what is in the inbox."),
        Step("mkdir -p images docs && mv inbox/*.jpg inbox/*.png images/ && mv inbox/*.txt inbox/*.md docs/",
             "Move the images and the documents with globs, one folder each."),
        Step("ls -R images docs inbox", "Check the result."),
    ]
    checks = (tree("images", {p: c for p, c in moved.items() if p.startswith("images/")}, files)
              + tree("docs", {p: c for p, c in moved.items() if p.startswith("docs/")}, files)
              + tree("inbox", stays, files))
    return Task(prompt, FINISH, files, steps, checks)


def _by_date(rng: random.Random) -> Task:
    files, expected, stays = {}, {}, {}
    taken = set()
    count = rng.randint(14, 20)
    while len(expected) < count:
        year, month, day, seq = rng.choice([2021, 2022, 2023]), rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 9999)
        if (year, month, day, seq) in taken:
            continue
        taken.add((year, month, day, seq))
        name = f"IMG_{year}{month:02d}{day:02d}_{seq:04d}.jpg"
        content = f"jpeg {name} {rng.getrandbits(32):08x}\n"
        files[f"camera/{name}"] = content
        expected[f"photos/{year}/{month:02d}/{day:02d}_{seq:04d}.jpg"] = content
    # Near misses that the rule must not touch.
    for _ in range(rng.randint(4, 7)):
        year, month, day, seq = rng.choice([2022, 2023]), rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 9999)
        name = rng.choice([
            f"IMG_{year}{month:02d}{day:02d}.jpg", f"img_{year}{month:02d}{day:02d}_{seq:04d}.jpg",
            f"VID_{year}{month:02d}{day:02d}_{seq:04d}.mp4", f"IMG_{year}{month:02d}{day:02d}_{seq:04d}.png",
            f"IMG_{year}{month:02d}{day:02d}_{seq:04d}_edit.jpg", f"IMG_{year}-{month:02d}-{day:02d}_{seq:04d}.jpg",
        ])
        files[f"camera/{name}"] = stays[f"camera/{name}"] = f"other {name}\n"
    prompt = (
        "The folder `camera/` holds photos named `IMG_<YYYYMMDD>_<NNNN>.jpg` (exactly 8 digits for the date, an "
        "underscore, 4 digits, the extension `.jpg`). Move each such photo to `photos/<YYYY>/<MM>/<DD>_<NNNN>.jpg`, "
        "creating folders as needed. Files whose names do not follow that exact pattern stay in `camera/` untouched."
    )
    script = (
        "for f in camera/IMG_[0-9][0-9][0-9][0-9][0-9][0-9][0-9][0-9]_[0-9][0-9][0-9][0-9].jpg; do "
        "b=${f#camera/}; d=${b:4:8}; n=${b:13:4}; "
        "mkdir -p \"photos/${d:0:4}/${d:4:2}\" && mv \"$f\" \"photos/${d:0:4}/${d:4:2}/${d:6:2}_$n.jpg\"; done"
    )
    steps = [
        Step("ls camera", "Look at the names first; some only look like the pattern."),
        Step(script, "A glob with exactly 8 and 4 digits matches only the real photos; the date parts come from fixed offsets."),
        Step("find photos -type f | sort | head -50; ls camera", "Check what moved and what stayed."),
    ]
    checks = tree("photos", expected, files) + tree("camera", stays, files)
    return Task(prompt, FINISH, files, steps, checks)


def _cleanup(rng: random.Random) -> Task:
    dirs = ["downloads"] + [f"downloads/{d}" for d in vocab.words(rng, 3)]
    dirs += [f"{rng.choice(dirs[1:])}/{d}" for d in vocab.words(rng, 2)]
    empty_dir = f"{rng.choice(dirs)}/empty{rng.randint(1, 9)}"
    files: dict[str, str] = {}
    blobs = [f"{vocab.sentence(rng)}\n" for _ in range(rng.randint(7, 10))]
    exts = ["txt", "TXT", "pdf", "PDF", "Jpg", "md", "csv"]
    stems = vocab.words(rng, 40)
    for blob in blobs:
        for _ in range(rng.choice([1, 1, 2, 3])):
            stem = stems.pop()
            name = stem if rng.random() < 0.7 else f"{stem} copy"
            files[f"{rng.choice(dirs)}/{name}.{rng.choice(exts)}"] = blob
    for _ in range(rng.randint(2, 4)):
        files[f"{rng.choice(dirs)}/{stems.pop()}{rng.choice(['.tmp', '.txt~', '.md~'])}"] = rng.choice(blobs)
    # A folder whose only files are temporary must end up removed too.
    files[f"{empty_dir}/{stems.pop()}.tmp"] = "scratch\n"

    survivors = {p: c for p, c in files.items() if not (p.endswith(".tmp") or p.endswith("~"))}
    kept: dict[str, str] = {}
    seen = set()
    for path in sorted(survivors, key=lambda p: p.encode()):
        if survivors[path] not in seen:
            seen.add(survivors[path])
            stem, _, ext = path.rpartition(".")
            kept[f"{stem}.{ext.lower()}"] = survivors[path]
    remaining_dirs = {"/".join(p.split("/")[:i]) for p in kept for i in range(2, p.count("/") + 1)}
    prompt = (
        "Clean up `downloads/` (including all subfolders), applying these rules in order:\n"
        "1. Delete temporary files: names ending in `.tmp` or in `~`.\n"
        "2. Among the remaining files, whenever several have byte-identical content keep only the one whose path "
        "comes first in byte order (as `LC_ALL=C sort` orders paths) and delete the others.\n"
        "3. Make every remaining file's extension (the part after the last dot) lower-case, e.g. `a.PDF` -> `a.pdf`.\n"
        "4. Remove every folder under `downloads/` that is now empty (`downloads/` itself stays).\n"
        "Some file names contain spaces."
    )
    steps = [
        Step("find downloads | LC_ALL=C sort", "See the whole tree first."),
        Step("find downloads -type f \\( -name '*.tmp' -o -name '*~' \\) -delete", "Rule 1: temporary files go."),
        Step("find downloads -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum | awk 'seen[$1]++' | cut -c67- | "
             "while IFS= read -r f; do rm -- \"$f\"; done",
             "Rule 2: hash the files in byte order; every repeat of a hash after its first is a duplicate."),
        Step("find downloads -type f -name '*.*' | while IFS= read -r f; do e=\"${f##*.}\"; l=$(printf %s \"$e\" | tr A-Z a-z); "
             "[ \"$e\" = \"$l\" ] || mv -- \"$f\" \"${f%.*}.$l\"; done",
             "Rule 3: lower-case the extensions that are not already."),
        Step("find downloads -mindepth 1 -type d -empty -delete && find downloads | LC_ALL=C sort",
             "Rule 4: -delete works depth first, so folders emptied by removing their empty children go too."),
    ]
    checks = tree("downloads", kept, files, remaining_dirs)
    return Task(prompt, FINISH, files, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: move by extension; medium: rename into date folders with near-miss names; hard: four cleanup rules."""
    return {"easy": _by_type, "medium": _by_date, "hard": _cleanup}[difficulty](rng)
