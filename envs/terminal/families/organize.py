"""Files family: sort, rename and prune files by stated rules (by type, by date in the name, duplicates)."""
from __future__ import annotations

import random

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Step, Task, tree

FINISH = "a one-line summary of what you did."
EXTENSIONS = ("jpg", "png", "gif", "txt", "md", "pdf", "csv", "log", "json", "wav", "mp3", "zip")


def _by_type(rng: random.Random) -> Task:
    # Folder names and the extension groups change per seed, so a remembered command moves nothing elsewhere.
    source = f"{rng.choice(vocab.WORDS)}-{rng.choice(['inbox', 'drop', 'incoming', 'unsorted'])}"
    kinds = rng.sample(list(EXTENSIONS), 6)
    groups = dict(zip(vocab.words(rng, 2), (tuple(kinds[0:2]), tuple(kinds[2:4]))))
    others = tuple(kinds[4:])
    names = vocab.words(rng, rng.randint(12, 18))
    files, moved, stays = {}, {}, {}
    # Every extension appears at least once, so each glob in the rules matches something.
    extensions = kinds + [rng.choice(kinds) for _ in range(len(names) - len(kinds))]
    for name, ext in zip(names, extensions):
        content = f"{vocab.sentence(rng)}\n"
        files[f"{source}/{name}.{ext}"] = content
        target = next((folder for folder, exts in groups.items() if ext in exts), None)
        if target:
            moved[f"{target}/{name}.{ext}"] = content
        else:
            stays[f"{source}/{name}.{ext}"] = content
    (first, first_exts), (second, second_exts) = groups.items()
    prompt = (
        f"The folder `{source}/` is a mess. Move every `.{first_exts[0]}` and `.{first_exts[1]}` file from `{source}/` into "
        f"a new folder `{first}/`, and every `.{second_exts[0]}` and `.{second_exts[1]}` file into a new folder "
        f"`{second}/`, keeping the file names. Leave the other files ({', '.join('.' + e for e in others)}) where they are."
    )
    steps = [
        Step(f"ls {source}", "First see what is in the folder."),
        Step(f"mkdir -p {first} {second} && mv {source}/*.{first_exts[0]} {source}/*.{first_exts[1]} {first}/ && "
             f"mv {source}/*.{second_exts[0]} {source}/*.{second_exts[1]} {second}/",
             "Move each group with globs, one folder each."),
        Step(f"ls -R {first} {second} {source}", "Check the result."),
    ]
    checks = (tree(first, {p: c for p, c in moved.items() if p.startswith(f"{first}/")}, files)
              + tree(second, {p: c for p, c in moved.items() if p.startswith(f"{second}/")}, files)
              + tree(source, stays, files))
    return Task(prompt, FINISH, files, steps, checks)


# Destination layouts for the date task: how a photo's date and number become its new path, in words and in bash
# (with $y, $m, $d and $n set from the name).
LAYOUTS = (
    ("<YYYY>/<MM>/<DD>_<NNNN>", "$y/$m/${d}_$n"),
    ("<YYYY>-<MM>/<DD>-<NNNN>", "$y-$m/$d-$n"),
    ("<YYYY>/<MM>-<DD>/<NNNN>", "$y/$m-$d/$n"),
)


def _by_date(rng: random.Random) -> Task:
    source = f"{rng.choice(vocab.WORDS)}-{rng.choice(['camera', 'phone', 'card'])}"
    dest = rng.choice([w for w in vocab.WORDS if w not in source])
    prefix, other = rng.sample(["IMG", "DSC", "PXL", "CAM"], 2)
    ext = rng.choice(["jpg", "jpeg", "heic"])
    words, bash = rng.choice(LAYOUTS)
    files, expected, stays = {}, {}, {}
    taken = set()
    count = rng.randint(12, 22)
    years = rng.sample(range(2015, 2025), 3)
    while len(expected) < count:
        year, month, day, seq = rng.choice(years), rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 9999)
        if (year, month, day, seq) in taken:
            continue
        taken.add((year, month, day, seq))
        name = f"{prefix}_{year}{month:02d}{day:02d}_{seq:04d}.{ext}"
        content = f"{ext} {name} {rng.getrandbits(32):08x}\n"
        files[f"{source}/{name}"] = content
        target = bash.replace("${d}", "$d")
        for var, value in (("$y", f"{year}"), ("$m", f"{month:02d}"), ("$d", f"{day:02d}"), ("$n", f"{seq:04d}")):
            target = target.replace(var, value)
        expected[f"{dest}/{target}.{ext}"] = content
    # Near misses that the rule must not touch.
    for _ in range(rng.randint(4, 7)):
        year, month, day, seq = rng.choice(years), rng.randint(1, 12), rng.randint(1, 28), rng.randint(1, 9999)
        name = rng.choice([
            f"{prefix}_{year}{month:02d}{day:02d}.{ext}", f"{prefix.lower()}_{year}{month:02d}{day:02d}_{seq:04d}.{ext}",
            f"{other}_{year}{month:02d}{day:02d}_{seq:04d}.{ext}", f"{prefix}_{year}{month:02d}{day:02d}_{seq:04d}.png",
            f"{prefix}_{year}{month:02d}{day:02d}_{seq:04d}_edit.{ext}", f"{prefix}_{year}-{month:02d}-{day:02d}_{seq:04d}.{ext}",
        ])
        files[f"{source}/{name}"] = stays[f"{source}/{name}"] = f"other {name}\n"
    prompt = (
        f"The folder `{source}/` holds photos named `{prefix}_<YYYYMMDD>_<NNNN>.{ext}` (exactly 8 digits for the date, an "
        f"underscore, 4 digits, the extension `.{ext}`). Move each such photo to `{dest}/{words}.{ext}`, "
        f"creating folders as needed. Files whose names do not follow that exact pattern stay in `{source}/` untouched."
    )
    digits = "[0-9]" * 8 + "_" + "[0-9]" * 4
    script = (
        f"for f in {source}/{prefix}_{digits}.{ext}; do "
        f"b=${{f#{source}/}}; y=${{b:4:4}}; m=${{b:8:2}}; d=${{b:10:2}}; n=${{b:13:4}}; "
        f"t=\"{dest}/{bash}.{ext}\"; mkdir -p \"$(dirname \"$t\")\" && mv \"$f\" \"$t\"; done"
    )
    steps = [
        Step(f"ls {source}", "Look at the names first; some only look like the pattern."),
        Step(script, "A glob with exactly 8 and 4 digits matches only the real photos; the date parts come from fixed offsets."),
        Step(f"find {dest} -type f | sort | head -50; ls {source}", "Check what moved and what stayed."),
    ]
    checks = tree(dest, expected, files) + tree(source, stays, files)
    return Task(prompt, FINISH, files, steps, checks)


TEMP_SUFFIXES = (".tmp", "~", ".swp", ".part")


def _cleanup(rng: random.Random) -> Task:
    root = f"{rng.choice(vocab.WORDS)}-{rng.choice(['downloads', 'dump', 'share', 'stash'])}"
    temp = sorted(rng.sample(TEMP_SUFFIXES, 2))
    keep_last = rng.random() < 0.5
    dirs = [root] + [f"{root}/{d}" for d in vocab.words(rng, 3)]
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
        suffix = rng.choice(temp)
        name = f"{stems.pop()}.{rng.choice(['txt', 'md'])}{suffix}" if suffix == "~" else f"{stems.pop()}{suffix}"
        files[f"{rng.choice(dirs)}/{name}"] = rng.choice(blobs)
    # A folder whose only files are temporary must end up removed too; a temp-looking name of the other kind stays.
    files[f"{empty_dir}/{stems.pop()}{temp[0] if temp[0] != '~' else '.txt~'}"] = "scratch\n"
    spared = next(s for s in TEMP_SUFFIXES if s not in temp and s != "~")
    files[f"{rng.choice(dirs)}/{stems.pop()}{spared}"] = f"{vocab.sentence(rng)} kept\n"

    survivors = {p: c for p, c in files.items() if not p.endswith(tuple(temp))}
    kept: dict[str, str] = {}
    seen = set()
    for path in sorted(survivors, key=lambda p: p.encode(), reverse=keep_last):
        if survivors[path] not in seen:
            seen.add(survivors[path])
            stem, _, ext = path.rpartition(".")
            kept[f"{stem}.{ext.lower()}"] = survivors[path]
    remaining_dirs = {"/".join(p.split("/")[:i]) for p in kept for i in range(2, p.count("/") + 1)}
    which = "last" if keep_last else "first"
    prompt = (
        f"Clean up `{root}/` (including all subfolders), applying these rules in order:\n"
        f"1. Delete temporary files: names ending in `{temp[0]}` or in `{temp[1]}` (no other kind).\n"
        "2. Among the remaining files, whenever several have byte-identical content keep only the one whose path "
        f"comes {which} in byte order (as `LC_ALL=C sort` orders paths) and delete the others.\n"
        "3. Make every remaining file's extension (the part after the last dot) lower-case, e.g. `a.PDF` -> `a.pdf`.\n"
        f"4. Remove every folder under `{root}/` that is now empty (`{root}/` itself stays).\n"
        "Some file names contain spaces."
    )
    steps = [
        Step(f"find {root} | LC_ALL=C sort", "See the whole tree first."),
        Step(f"find {root} -type f \\( -name '*{temp[0]}' -o -name '*{temp[1]}' \\) -delete", "Rule 1: temporary files go."),
        Step(f"find {root} -type f -print0 | LC_ALL=C sort -z{'r' if keep_last else ''} | xargs -0 sha256sum | "
             "awk 'seen[$1]++' | cut -c67- | while IFS= read -r f; do rm -- \"$f\"; done",
             f"Rule 2: hash the files in {'reverse ' if keep_last else ''}byte order; every repeat of a hash after its "
             "first is a duplicate."),
        Step(f"find {root} -type f -name '*.*' | while IFS= read -r f; do e=\"${{f##*.}}\"; l=$(printf %s \"$e\" | tr A-Z a-z); "
             "[ \"$e\" = \"$l\" ] || mv -- \"$f\" \"${f%.*}.$l\"; done",
             "Rule 3: lower-case the extensions that are not already."),
        Step(f"find {root} -mindepth 1 -type d -empty -delete && find {root} | LC_ALL=C sort",
             "Rule 4: -delete works depth first, so folders emptied by removing their empty children go too."),
    ]
    checks = tree(root, kept, files, remaining_dirs)
    return Task(prompt, FINISH, files, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: move by extension; medium: rename into date folders with near-miss names; hard: four cleanup rules."""
    return {"easy": _by_type, "medium": _by_date, "hard": _cleanup}[difficulty](rng)
