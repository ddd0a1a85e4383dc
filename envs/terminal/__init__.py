"""Terminal domain: shell tasks (files, text, CSV, logs, archives, permissions, git, SQLite, make, a long release) in a sandbox.

`register()` only adds specs; the generators and the env are imported when an env is made.
"""
from __future__ import annotations

from jointrl.envs.base import EnvSpec

ENTRY_POINT = "jointrl.envs.terminal.env:TerminalEnv"
MAX_TURNS = {"easy": 10, "medium": 16, "hard": 24, "long": 40}
TIER = {"easy": "low", "medium": "high", "hard": "high", "long": "high"}

FAMILIES = {
    "organize-files": {
        "easy": "move files into folders by extension",
        "medium": "rename photos into date folders by a strict name pattern, skipping near misses",
        "hard": "clean a tree: drop temp files, dedupe by content, lower-case extensions, prune empty folders",
    },
    "text-count": {
        "easy": "count lines containing a string",
        "medium": "count whole-word, case-blind matching lines over a filtered file tree",
        "hard": "find the most frequent long word across a tree of text files",
    },
    "text-rewrite": {
        "easy": "replace a string in one config file, leaving another alone",
        "medium": "rename an identifier as a whole word across source files",
        "hard": "normalise ini files: drop comments, tighten key=value, set a key in one section",
    },
    "csv-report": {
        "easy": "filter CSV rows on an exact column value",
        "medium": "group-by sum of a product of columns for one year",
        "hard": "join two CSV files, filter case-blindly, rank the top N",
    },
    "log-report": {
        "easy": "count server errors in an access log",
        "medium": "rank the busiest client IPs, excluding health checks",
        "hard": "per-path error rates over rotated and gzipped logs",
    },
    "archive": {
        "easy": "extract a tarball without its top-level folder",
        "medium": "create a tarball of exactly a filtered set of files",
        "hard": "repack a tarball with a nested archive, dropping stale files and fixing a version",
    },
    "permissions": {
        "easy": "set explicit octal modes",
        "medium": "set modes by file-name patterns and for directories",
        "hard": "apply symbolic, shebang- and content-based mode rules in order, with a sticky directory",
    },
    "git": {
        "easy": "branch from main and commit a new file",
        "medium": "merge a diverged branch with a merge commit, tag it, delete a stale branch",
        "hard": "merge with a conflict resolved key by key by a stated rule",
    },
    "sqlite": {
        "easy": "query an SQLite database into a sorted text file",
        "medium": "update and delete rows by rules",
        "hard": "joined spending report to CSV plus a threshold update",
    },
    "makefile": {
        "easy": "fix space-indented recipes so make builds",
        "medium": "fix the default goal, a wrong prerequisite and a missing rule",
        "hard": "complete a Makefile with pattern rules that pick up new sources",
    },
    "release": {
        "long": "unpack a project, fix its broken Makefile rule and bad data row, rebuild, package and log the release",
    },
}


def register() -> None:
    """Register every terminal family at every difficulty."""
    from jointrl.envs.registry import register as add

    for family, levels in FAMILIES.items():
        for difficulty, description in levels.items():
            add(EnvSpec(
                id=f"terminal/{family}-v0:{difficulty}",
                entry_point=ENTRY_POINT,
                kwargs={"family": family},
                default_tier=TIER[difficulty],
                max_turns=MAX_TURNS[difficulty],
                description=f"Shell: {description}.",
            ))
