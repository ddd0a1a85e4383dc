"""Git checks: resolve revision expressions with git itself inside the verifier's copy, one process per repository."""
from __future__ import annotations

import base64
import shlex

from jointrl.envs.terminal.task import Git


def git_command(repo: str) -> str:
    """`git cat-file --batch` over the expressions on stdin, base64-encoded (trees are binary)."""
    # -c outranks the repository's own config: no fsmonitor hook, no hooks; cat-file applies no filters.
    return (f"git -C {shlex.quote(repo)} -c safe.directory='*' -c core.fsmonitor=false -c core.hooksPath=/dev/null "
            "cat-file --batch 2>/dev/null | base64 -w0")


def parse_batch(data: bytes, count: int) -> list[tuple[str, str, bytes] | str | None]:
    """`git cat-file --batch` output: per expression (oid, type, content), 'missing', or None when unreadable."""
    out: list = []
    pos = 0
    for _ in range(count):
        end = data.find(b"\n", pos)
        if end < 0:
            out.append(None)
            continue
        header = data[pos:end].decode(errors="replace").split(" ")
        pos = end + 1
        if header[-1] in ("missing", "ambiguous"):
            out.append("missing")
            continue
        if len(header) != 3 or not header[2].isdigit():
            out += [None] * (count - len(out))
            break
        size = int(header[2])
        out.append((header[0], header[1], data[pos:pos + size]))
        pos += size + 1
    return out


def tree_names(content: bytes, oid_bytes: int) -> tuple[str, ...]:
    """The entry names of a raw git tree object (`<mode> <name>\\0<oid>` repeated)."""
    names, pos = [], 0
    while pos < len(content):
        nul = content.index(b"\0", pos)
        names.append(content[pos:nul].split(b" ", 1)[1].decode(errors="replace"))
        pos = nul + 1 + oid_bytes
    return tuple(sorted(names))


def git_results(copy, checks: list[Git], recorded: dict[str, str], env: dict[str, str]) -> list[bool]:
    """Whether each check holds, resolving all expressions with one git process per repository."""
    results: dict[int, bool] = {}
    for repo in dict.fromkeys(c.repo for c in checks):
        group = [c for c in checks if c.repo == repo]
        exprs = list(dict.fromkeys([c.expr for c in group] + [c.same_as for c in group if c.same_as]))
        result = copy.run(git_command(repo), stdin="".join(f"{e}\n" for e in exprs), timeout=20, env=env)
        try:
            raw = base64.b64decode(result.stdout.strip(), validate=True) if result.ok and not result.truncated else b""
        except ValueError:
            raw = b""
        resolved = dict(zip(exprs, parse_batch(raw, len(exprs))))
        for check in group:
            results[id(check)] = holds(check, resolved, recorded)
    return [results[id(c)] for c in checks]


def holds(check: Git, resolved: dict, recorded: dict[str, str]) -> bool:
    """Whether one check holds given the resolved expressions."""
    got = resolved.get(check.expr)
    if check.missing:
        return got == "missing"
    if not isinstance(got, tuple):
        return False
    oid, kind, content = got
    if check.recorded is not None:
        return oid == recorded.get(check.recorded)
    if check.same_as is not None:
        other = resolved.get(check.same_as)
        return isinstance(other, tuple) and other[0] == oid
    if check.content is not None:
        return kind == "blob" and content.decode(errors="replace").rstrip("\n") == check.content.rstrip("\n")
    if check.subject is not None:
        message = content.split(b"\n\n", 1)[1] if b"\n\n" in content else b""
        return kind == "commit" and message.decode(errors="replace").split("\n", 1)[0].strip() == check.subject
    if kind != "tree":
        return False
    try:
        return tree_names(content, len(oid) // 2) == tuple(sorted(check.entries))
    except (ValueError, IndexError):
        return False
