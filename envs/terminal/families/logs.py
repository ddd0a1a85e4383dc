"""Log family: count, rank and rate entries of web access logs, some of them rotated and gzipped."""
from __future__ import annotations

import gzip
import random
from collections import Counter

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Answer, File, Step, Task

MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
STATUSES = (200, 200, 200, 200, 201, 204, 301, 304, 400, 403, 404, 500, 502, 503)


def _ip(rng: random.Random) -> str:
    return f"10.{rng.randint(0, 3)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}"


def _line(rng: random.Random, ip: str, path: str, status: int) -> str:
    clock = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}"
    stamp = f"{rng.randint(1, 28):02d}/{rng.choice(MONTHS)}/2024:{clock} +0000"
    method = rng.choice(["GET", "GET", "GET", "POST", "PUT"])
    # Sizes that start with 5 make a careless `grep ' 5'` overcount.
    size = rng.choice([rng.randint(100, 9999), rng.randint(500, 599), rng.randint(5000, 5999)])
    return f'{ip} - - [{stamp}] "{method} {path} HTTP/1.1" {status} {size}'


def _paths(rng: random.Random, count: int) -> list[str]:
    return [f"/{rng.choice(['api', 'app', 'static'])}/{w}" for w in vocab.words(rng, count)]


# The easy task's questions: a description and the status codes it counts.
QUESTIONS = (
    ("got a server error, i.e. an HTTP status from 500 to 599", range(500, 600)),
    ("got a client error, i.e. an HTTP status from 400 to 499", range(400, 500)),
    ("got a redirect or not-modified answer, i.e. an HTTP status from 300 to 399", range(300, 400)),
)


def _log_name(rng: random.Random) -> str:
    return f"{rng.choice(vocab.WORDS)}-{rng.choice(['access', 'web', 'proxy', 'edge'])}{rng.randint(1, 9)}.log"


def _status_codes(rng: random.Random) -> list[int]:
    """A per-seed status mix: each code's weight varies, so counts spread widely across seeds."""
    return rng.choices(STATUSES, k=40)


def _server_errors(rng: random.Random) -> Task:
    log = _log_name(rng)
    question, counted = rng.choice(QUESTIONS)
    method = rng.choice(["GET", "POST", "PUT", None])
    ips, paths, statuses = [_ip(rng) for _ in range(12)], _paths(rng, 8), _status_codes(rng)
    entries = [(rng.choice(ips), rng.choice(paths), rng.choice(statuses)) for _ in range(rng.randint(100, 1200))]
    lines = [_line(rng, *e) for e in entries]
    # The method is drawn inside each line, so it is read back from the line's request field.
    expected = sum(status in counted and (method is None or f'"{method} ' in line) for (_, _, status), line in zip(entries, lines))
    # A path with a counted code in it: not a status.
    lines.insert(rng.randint(0, len(lines)), _line(rng, ips[0], f"/api/items/{counted[0]}", 200))
    low, high = counted[0], counted[-1]
    which = "requests" if method is None else f"{method} requests"
    prompt = (f"How many {which} in `{log}` {question}? The log is in the "
              "common log format: `ip - - [time] \"METHOD path PROTOCOL\" status bytes`.")
    match = "" if method is None else f" && $6 == \"\\\"{method}\""
    steps = [
        Step(f"head -3 {log}", "Find which field is the status: with whitespace splitting it is field 9 (the method is 6)."),
        Step(f"awk '$9 >= {low} && $9 <= {high}{match}' {log} | wc -l",
             "Compare the status field itself, not any digits in the line."),
    ]
    finish = "it must contain only the number, nothing else."
    return Task(prompt, finish, {log: "\n".join(lines) + "\n"}, steps, [Answer(str(expected))], answer_from_output=True)


def _top_clients(rng: random.Random) -> Task:
    top_n = rng.choice([3, 4, 5])
    paths = _paths(rng, 8)
    while True:
        ips = list(dict.fromkeys(_ip(rng) for _ in range(10)))
        entries = [(rng.choice(ips), rng.choice(paths), rng.choice(STATUSES)) for _ in range(rng.randint(150, 260))]
        counts = Counter(ip for ip, _, _ in entries)
        ranked = counts.most_common()
        if len(ranked) > top_n and len({c for _, c in ranked[: top_n + 1]}) == top_n + 1:
            break
    # The health checker is the busiest client, but its requests do not count.
    checker, health = "127.0.0.1", rng.choice(["/healthz", "/ping", "/status", "/livez"])
    entries += [(checker, health, 200)] * (ranked[0][1] + rng.randint(5, 30))
    rng.shuffle(entries)
    lines = [_line(rng, *e) for e in entries]
    expected = "".join(f"{count} {ip}\n" for ip, count in ranked[:top_n])
    log, out = _log_name(rng), f"{rng.choice(vocab.WORDS)}-top.txt"
    prompt = (f"Ignoring requests for `{health}`, which {top_n} client IPs made the most requests in `{log}`? Write them to "
              f"`{out}`, one per line as `<count> <ip>` (a single space between), most requests first.")
    steps = [
        Step(f"head -3 {log} && awk '{{print $7}}' {log} | sort | uniq -c | sort -rn | head",
             "See the format and the busiest paths."),
        Step(f"awk '$7 != \"{health}\" {{print $1}}' {log} | sort | uniq -c | sort -rn | head -{top_n} | "
             f"awk '{{print $1, $2}}' > {out} && cat {out}",
             "Drop the health checks by path, count per IP, rank, and strip uniq's padding."),
    ]
    return Task(prompt, "a one-line summary of what you wrote.", {log: "\n".join(lines) + "\n"}, steps,
                [File(out, expected, match="table", delimiter=" ")])


def _error_rates(rng: random.Random) -> Task:
    min_requests = rng.choice([15, 20, 25])
    paths = _paths(rng, rng.randint(7, 10))
    # Two rare paths fall under the request threshold.
    weights = {p: (0.03 if i < 2 else rng.uniform(0.3, 1.0)) for i, p in enumerate(paths)}
    failure = {p: rng.choice([0.0, 0.05, 0.1, 0.2, 0.35]) for p in paths}
    files, requests, errors = {}, Counter(), Counter()
    folder, out = rng.choice(vocab.WORDS), f"{rng.choice(vocab.WORDS)}-errors.tsv"
    for index in range(4):
        lines = []
        for _ in range(rng.randint(50, 90)):
            path = rng.choices(paths, [weights[p] for p in paths])[0]
            status = rng.choice([500, 502, 503]) if rng.random() < failure[path] else rng.choice(STATUSES[:10])
            query = f"?id={rng.randint(1, 99)}" if rng.random() < 0.3 else ""
            lines.append(_line(rng, _ip(rng), path + query, status))
            requests[path] += 1
            errors[path] += status >= 500
        text = "\n".join(lines) + "\n"
        name = f"{folder}/access.log" + (f".{index}" if index else "")
        files[name + ".gz" if index >= 2 else name] = gzip.compress(text.encode(), mtime=0) if index >= 2 else text
    rows = []
    for path in paths:
        if requests[path] >= min_requests:
            rows.append((path, requests[path], errors[path], "%.1f" % (100 * errors[path] / requests[path])))
    rows.sort(key=lambda r: (-float(r[3]), r[0]))
    expected = "".join(f"{p}\t{n}\t{e}\t{rate}\n" for p, n, e, rate in rows)
    prompt = (
        f"`{folder}/` holds a web server's access log and its rotations (`access.log`, `access.log.1`, and gzipped older ones). "
        "Over all of them together, for each request path (without any `?query` part) compute the number of requests, "
        "the number of server errors (status 500-599), and the error rate `100 * errors / requests` with one decimal. "
        f"Only paths with at least {min_requests} requests go in the report. Write `{out}` with one tab-separated line "
        "`path<TAB>requests<TAB>errors<TAB>rate` per path, no header, sorted by the printed rate (highest first) and then by path."
    )
    script = (
        f"zcat -f {folder}/access.log* | awk '{{ split($7, p, \"?\"); n[p[1]]++; if ($9 >= 500 && $9 <= 599) e[p[1]]++ }} "
        f"END {{ for (k in n) if (n[k] >= {min_requests}) printf \"%s\\t%d\\t%d\\t%.1f\\n\", k, n[k], e[k], 100 * e[k] / n[k] }}' | "
        f"sort -t \"$(printf '\\t')\" -k4,4nr -k1,1 > {out} && cat {out}"
    )
    steps = [
        Step(f"ls -l {folder} && zcat -f {folder}/access.log* | wc -l", "zcat -f reads plain and gzipped files alike."),
        Step(script, "Strip the query, count requests and 5xx per path, keep busy paths, and sort by rate then path."),
    ]
    return Task(prompt, "a one-line summary of what you wrote.", files, steps,
                [File(out, expected, match="table", delimiter="\t", tolerance=0.051)])


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: count 5xx; medium: top clients minus health checks; hard: per-path error rates over rotated gzipped logs."""
    return {"easy": _server_errors, "medium": _top_clients, "hard": _error_rates}[difficulty](rng)
