"""Release family (long horizon): unpack a project, find and fix what breaks its build, verify it, and ship it.

The stages depend on each other: the build can only be run once the project is unpacked where asked; `make`'s own
errors point at the broken rule and then at the one data row that fails validation (whose fix is looked up in a
list that also holds other releases' corrections); the shipped tarball and the release log need the outputs of a
build that passes. The checker rebuilds from scratch in its own copy, so outputs written by hand do not count.
"""
from __future__ import annotations

import random

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.families.archives import make_tar
from jointrl.envs.terminal.task import File, Run, Step, Tar, Task

FINISH = "a one-line summary of what you shipped."
BAD_QTY = ("{d}O", "{d}?", "n/a", "TBD", "~{d}")  # how the broken row's qty is garbled
MAKEFILE = r"""DATA := $(sort $(wildcard data/*.csv))
OUT := @OUT@

.PHONY: all clean
all: $(OUT)/summary.txt

$(OUT)/check.ok: $(DATA)
	@mkdir -p $(OUT)
	@awk -F, 'FNR > 1 && $$3 !~ /^[0-9]+$$/ { printf "%s:%d: bad qty \"%s\" for id %s\n", FILENAME, FNR, $$3, $$1; bad = 1 } END { exit bad }' $(DATA)
	@touch $@

$(OUT)/totals.csv: $(OUT)/check.ok $(DATA)
	echo file,rows,total > $@
	for f in $(DATA); do awk -F, -v n=$$(basename $$f .csv) 'FNR > 1 { r++; t += $$3 * $$4 } END { printf "%s,%d,%d\n", n, r, t }' $$f; done >> $@

$(OUT)/summary.txt: @TOTALS@
@INDENT@awk -F, 'NR > 1 { f++; r += $$2; t += $$3 } END { printf "files %d\nrows %d\ntotal %d\n", f, r, t }' $< > $@

clean:
	rm -rf $(OUT)
"""


def makefile(out: str, bug: str | None, indent: str = "    ") -> str:
    """The project's Makefile, sound or with one broken rule: a recipe indented by `indent` ('spaces') or a misspelled
    prerequisite ('typo')."""
    if bug not in (None, "spaces", "typo"):
        raise ValueError(f"unknown Makefile bug {bug!r}; known: spaces, typo")
    text = MAKEFILE.replace("@OUT@", out)
    text = text.replace("@TOTALS@", "$(OUT)/total.csv" if bug == "typo" else "$(OUT)/totals.csv")
    return text.replace("@INDENT@", indent if bug == "spaces" else "\t")


def outputs(tables: dict[str, list[tuple]]) -> tuple[str, str, int]:
    """(totals.csv, summary.txt, grand total) as the fixed build computes them, from the data rows."""
    lines, rows, total = ["file,rows,total"], 0, 0
    for name in sorted(tables, key=lambda n: f"data/{n}.csv"):
        file_total = sum(qty * price for _, _, qty, price in tables[name])
        lines.append(f"{name},{len(tables[name])},{file_total}")
        rows, total = rows + len(tables[name]), total + file_total
    return "\n".join(lines) + "\n", f"files {len(tables)}\nrows {rows}\ntotal {total}\n", total


def _csv(rows: list[tuple]) -> str:
    return "id,item,qty,price\n" + "".join(f"{i},{item},{qty},{price}\n" for i, item, qty, price in rows)


def _release(rng: random.Random) -> Task:
    project = f"{rng.choice(vocab.WORDS)}-{rng.choice(['app', 'tool', 'site', 'lib', 'svc'])}"
    major, minor, patch = rng.randint(1, 6), rng.randint(0, 12), rng.randint(1, 9)
    version = f"{major}.{minor}.{patch}"
    top = f"{project}-{version}"
    archive, dest = f"incoming/{top}.tar.gz", f"{rng.choice(['work', 'staging', 'srv', 'builds'])}/{project}"
    out, bug, indent = rng.choice(["build", "out", "gen"]), rng.choice(["spaces", "typo"]), " " * rng.choice([4, 8])

    ids = iter(rng.sample(range(100, 1000), 60))
    tables = {name: [(next(ids), rng.choice(vocab.WORDS), rng.randint(1, 60), rng.randint(1, 500))
                     for _ in range(rng.randint(5, 10))] for name in vocab.words(rng, rng.randint(3, 5))}
    bad_file = rng.choice(sorted(tables))
    bad_index = rng.randrange(len(tables[bad_file]))
    bad_id, item, _, price = tables[bad_file][bad_index]
    fixed_qty = rng.randint(1, 60)
    garbled = rng.choice(BAD_QTY).format(d=rng.choice([d for d in range(1, 61) if d != fixed_qty]))
    tables[bad_file][bad_index] = (bad_id, item, fixed_qty, price)
    shipped = {name: _csv(rows) for name, rows in tables.items()}
    broken = dict(shipped)
    good_row, bad_row = f"{bad_id},{item},{fixed_qty},{price}", f"{bad_id},{item},{garbled},{price}"
    broken[bad_file] = broken[bad_file].replace(f"\n{good_row}\n", f"\n{bad_row}\n")
    totals, summary, total = outputs(tables)

    # Other releases' corrections name ids of this data too: only this release's line applies.
    other_versions = [f"{major}.{minor}.{p}" for p in range(patch)] + [f"{major}.{minor + 1}.0"]
    data_ids = [row[0] for rows in tables.values() for row in rows]
    corrections = [f"{project}-{version} {bad_id} {fixed_qty}"]
    corrections += [f"{project}-{rng.choice(other_versions)} {rng.choice(data_ids)} {rng.randint(61, 99)}" for _ in range(6)]
    strangers = [w for w in vocab.WORDS if not project.startswith(f"{w}-")]
    corrections += [f"{rng.choice(strangers)}-app-{version} {rng.randint(100, 999)} {rng.randint(1, 99)}" for _ in range(3)]
    rng.shuffle(corrections)
    earlier = [f"{rng.choice(vocab.WORDS)}-{rng.choice(['app', 'lib'])} {rng.randint(1, 5)}.{rng.randint(0, 9)}.{rng.randint(0, 9)} "
               f"{rng.randint(1000, 99999)}" for _ in range(rng.randint(2, 5))]

    project_files = {"Makefile": makefile(out, bug, indent), "VERSION": f"{version}\n",
                     **{f"data/{name}.csv": text for name, text in broken.items()}}
    tarball = make_tar({f"{top}/{path}": text.encode() for path, text in project_files.items()}, compress=True)
    files = {archive: tarball, "incoming/corrections.txt": "# release id qty\n" + "\n".join(corrections) + "\n",
             "releases.log": "\n".join(earlier) + "\n"}
    log_line = f"{project} {version} {total}"
    prompt = (
        f"Ship release {version} of `{project}`:\n"
        f"1. Unpack `{archive}` so that the contents of its top folder `{top}/` are directly in `{dest}/` "
        f"(e.g. `{dest}/Makefile`).\n"
        f"2. Running `make` in `{dest}/` must build `{out}/totals.csv` and `{out}/summary.txt`, but it fails. Fix the "
        "Makefile (one rule is broken) and the data: exactly one row of `data/*.csv` fails the build's validation; set its "
        f"`qty` to the value listed for that row's id under release `{top}` in `incoming/corrections.txt` (the list "
        "also holds corrections for other releases, which must not be applied). Change nothing else in the data.\n"
        f"3. Package `dist/{top}.tar.gz` (gzip-compressed tar) holding exactly `{top}/totals.csv` and `{top}/summary.txt` "
        f"(as built) and `{top}/VERSION` (the project's own).\n"
        f"4. Append the line `{project} {version} <total>` to `releases.log`, where `<total>` is the `total` figure of the "
        "built summary; keep the earlier lines.\n"
        "The checker rebuilds from a clean state, so the Makefile and the data must be right, not only the outputs."
    )
    bad_line = 2 + bad_index
    makefile_fix = ("sed -i 's/^ \\{4,\\}/\\t/' Makefile" if bug == "spaces"
                    else "sed -i 's#(OUT)/total\\.csv#(OUT)/totals.csv#' Makefile")
    steps = [
        Step("ls -R incoming && cat releases.log && head -5 incoming/corrections.txt", "See what there is to work with."),
        Step(f"tar -tzf {archive}", "The archive's layout: one top folder to drop."),
        Step(f"mkdir -p {dest} && tar -xzf {archive} -C {dest} --strip-components=1 && cd {dest} && ls -R",
             "Unpack into the requested folder without the top folder, and work from there."),
        Step("make", "Build once to see what breaks first."),
        Step("cat -A Makefile | grep -n 'summary\\|total'", "Look at the failing rule; -A shows tabs as ^I."),
        Step(f"{makefile_fix} && make -n | head -3",
             "Repair the rule: recipes need a leading tab, and the prerequisite must name the real target."),
        Step("make", "Build again: now the validation names the bad row, its file, line and id."),
        Step(f"grep -- '^{top} {bad_id} ' /workspace/incoming/corrections.txt",
             "Take the correction for this release and this id only."),
        Step(f"sed -i '{bad_line}s/.*/{good_row}/' data/{bad_file}.csv && sed -n '{bad_line}p' data/{bad_file}.csv",
             "Set the row's qty to the listed value, leaving its other fields as they were."),
        Step(f"make && cat {out}/summary.txt", "The build passes; the summary holds the total for the log."),
        Step(f"mkdir -p /workspace/ship/{top} /workspace/dist && cp {out}/totals.csv {out}/summary.txt VERSION "
             f"/workspace/ship/{top}/ && tar -czf /workspace/dist/{top}.tar.gz -C /workspace/ship {top} && "
             f"rm -rf /workspace/ship && tar -tzf /workspace/dist/{top}.tar.gz",
             "Stage the three files under the release's folder name, pack them, and drop the staging folder."),
        Step(f"printf '%s\\n' '{log_line}' >> /workspace/releases.log && tail -3 /workspace/releases.log",
             "Record the release with the built total."),
    ]
    checks: list = [
        Tar(f"dist/{top}.tar.gz", {f"{top}/totals.csv": totals.encode(), f"{top}/summary.txt": summary.encode(),
                                   f"{top}/VERSION": f"{version}\n".encode()}),
        File("releases.log", files["releases.log"] + log_line + "\n"),
        Tar(archive, {f"{top}/{path}": text.encode() for path, text in project_files.items()}, keep=True),
        *[File(f"{dest}/data/{name}.csv", text, match="exact") for name, text in sorted(shipped.items())],
        Run(f"cd {dest} && rm -rf {out} && make", timeout=30),
        File(f"{dest}/{out}/totals.csv", totals),
        File(f"{dest}/{out}/summary.txt", summary),
    ]
    return Task(prompt, FINISH, files, steps, checks)


def build(difficulty: str, rng: random.Random) -> Task:
    """long: unpack, repair the build and one data row, verify with make, package and log the release."""
    if difficulty != "long":
        raise ValueError(f"the release family has only the 'long' difficulty, not {difficulty!r}")
    return _release(rng)
