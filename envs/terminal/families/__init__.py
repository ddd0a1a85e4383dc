"""The terminal task generators, one module per family: `build(difficulty, rng) -> Task`."""
from __future__ import annotations

from jointrl.envs.terminal.families import (archives, count, csvreport, gitrepo, logs, makefile, organize, permissions,
                                            release, rewrite, sqlite)

GENERATORS = {
    "organize-files": organize.build,
    "text-count": count.build,
    "text-rewrite": rewrite.build,
    "csv-report": csvreport.build,
    "log-report": logs.build,
    "archive": archives.build,
    "permissions": permissions.build,
    "git": gitrepo.build,
    "sqlite": sqlite.build,
    "makefile": makefile.build,
    "release": release.build,
}
