"""Text-count family: answer a counting question about text files (grep counts, whole words, word frequency)."""
from __future__ import annotations

import random
import re
from collections import Counter

from jointrl.envs.terminal import vocab
from jointrl.envs.terminal.task import Answer, Step, Task

NUMBER = "it must contain only the number, nothing else."


def _lines(rng: random.Random, count: int) -> list[str]:
    return [vocab.sentence(rng) for _ in range(count)]


def _plant(rng: random.Random, line: str, token: str) -> str:
    """Insert `token` as a word at a random position of `line`."""
    words = line.rstrip(".").split()
    words.insert(rng.randint(0, len(words)), token)
    return " ".join(words) + "."


def _substring(rng: random.Random) -> Task:
    word = rng.choice(vocab.WORDS)
    path = f"{rng.choice([w for w in vocab.WORDS if w != word])}.{rng.choice(['txt', 'log', 'md'])}"
    # A wide spread of line counts and rates spreads the answers, so no remembered number is often right.
    lines = _lines(rng, rng.randint(60, 400))
    rate = rng.uniform(0.05, 0.45)
    for i in range(len(lines)):
        roll = rng.random()
        if roll < rate:
            lines[i] = _plant(rng, lines[i], word)
        elif roll < rate + 0.1:
            lines[i] = _plant(rng, lines[i], word.capitalize())
        elif roll < rate + 0.17:
            lines[i] = _plant(rng, lines[i], word + rng.choice(["s", "ing", "er"]))
    expected = sum(word in line for line in lines)
    prompt = (f"How many lines of `{path}` contain the text `{word}` (case-sensitive; anywhere in the line, also inside "
              "longer words)?")
    # The path is quoted as the question quotes it: then it tokenises the same in both places (a bare path after a
    # space starts with a space-prefixed token), so writing the command is a token-for-token copy.
    steps = [Step(f"grep -c -- '{word}' '{path}'", "grep -c counts matching lines, and is case-sensitive by default.")]
    return Task(prompt, NUMBER, {path: "\n".join(lines) + "\n"}, steps,
                [Answer(str(expected))], answer_from_output=True)


def _whole_word(rng: random.Random) -> Task:
    word = rng.choice(vocab.WORDS)
    root, skipped = vocab.words(rng, 2)
    counted_ext, other_ext = rng.sample(["md", "txt", "rst"], 2)
    pattern = re.compile(rf"(?<![A-Za-z0-9_]){word}(?![A-Za-z0-9_])", re.IGNORECASE)
    variants = [word, word.upper(), word.capitalize(), f"{word}-based", f"({word})",
                f"{word}_id", f"pre{word}", f"{word}s", f"{word}2"]
    folders = [root, f"{root}/guides", f"{root}/guides/setup", f"{root}/reference", f"{root}/{skipped}", f"{root}/{skipped}/2019"]
    files: dict[str, str] = {}
    expected = 0
    # Varied rates and sizes spread the answers, so no remembered number is often right.
    rate = rng.uniform(0.05, 0.8)
    for i in range(rng.randint(8, 24)):
        folder = folders[i] if i < len(folders) else rng.choice(folders)
        path = f"{folder}/{rng.choice(vocab.WORDS)}{i}.{rng.choice([counted_ext, counted_ext, other_ext])}"
        lines = _lines(rng, rng.randint(10, 120))
        for j in range(len(lines)):
            if rng.random() < rate:
                lines[j] = _plant(rng, lines[j], rng.choice(variants))
        files[path] = "\n".join(lines) + "\n"
        if path.endswith(f".{counted_ext}") and not path.startswith(f"{root}/{skipped}/"):
            expected += sum(bool(pattern.search(line)) for line in lines)
    prompt = (
        f"In the `.{counted_ext}` files anywhere under `{root}/` — but not those under `{root}/{skipped}/` — how many lines "
        f"contain the word `{word}` as a whole word, ignoring case? A whole-word match is not directly preceded or followed "
        f"by a letter, digit or underscore. `.{other_ext}` files do not count."
    )
    steps = [
        Step(f"find {root} -type f | sort", "See which files and folders there are."),
        Step(f"grep -rwi --include='*.{counted_ext}' --exclude-dir={skipped} -- '{word}' {root} | wc -l",
             "grep -w matches whole words with exactly that definition, -i ignores case, and -r prints one line per matching line."),
    ]
    return Task(prompt, NUMBER, files, steps, [Answer(str(expected))], answer_from_output=True)


def _top_word(rng: random.Random) -> Task:
    min_len = rng.choice([5, 6, 7])
    # Two words: one word x three lengths made 447 distinct prompts, and 16% of 100 held-out seeds asked exactly
    # a training seed's question.
    root = "-".join(vocab.words(rng, 2))
    files: dict[str, str] = {}
    counted: Counter = Counter()
    folders = [root, f"{root}/a", f"{root}/b", f"{root}/b/c"]
    for i in range(rng.randint(6, 9)):
        lines = _lines(rng, rng.randint(15, 30))
        for j in range(len(lines)):
            if rng.random() < 0.2:
                lines[j] = lines[j].replace(" ", "-", 1) + " " + rng.choice(vocab.WORDS).upper() + "'s"
        path = f"{folders[i % len(folders)]}/part{i}.txt"
        files[path] = "\n".join(lines) + "\n"
        counted.update(w for w in re.findall(r"[a-z]+", files[path].lower()) if len(w) >= min_len)
    # Make the winner unique, and plant a louder word in files that must not be counted.
    (top, top_count), (second, second_count) = counted.most_common(2)
    if top_count == second_count:
        files[next(iter(files))] += f"{top.capitalize()}!\n"
        counted[top] += 1
    loud = rng.choice([w for w in vocab.WORDS if len(w) >= min_len and w != top])
    files[f"{root}/notes.md"] = f"{loud} " * (counted[top] + 5) + "\n"
    files[f"{root}/b/old.txt.bak"] = f"{loud} " * (counted[top] + 3) + "\n"
    prompt = (
        f"Across all `.txt` files anywhere under `{root}/` (no other files), which word of at least {min_len} letters occurs "
        "most often? Words are maximal runs of the letters A-Z/a-z (anything else separates words) and are counted "
        "case-insensitively. Answer in the form `<word> <count>` with the word in lower case, e.g. `garden 17`."
    )
    steps = [
        Step(f"find {root} -type f | sort", "Only .txt files count; note the other files."),
        Step(f"find {root} -type f -name '*.txt' -exec cat {{}} + | tr -cs 'A-Za-z' '\\n' | tr 'A-Z' 'a-z' | "
             f"awk 'length($0) >= {min_len}' | sort | uniq -c | sort -rn | head -3",
             "Split on every non-letter, lower-case, keep long words, and count."),
        Step(f"find {root} -type f -name '*.txt' -exec cat {{}} + | tr -cs 'A-Za-z' '\\n' | tr 'A-Z' 'a-z' | "
             f"awk 'length($0) >= {min_len}' | sort | uniq -c | sort -rn | head -1 | awk '{{print $2, $1}}'",
             "The top entry is unique; print it as word and count."),
    ]
    finish = "it must contain only `<word> <count>`, nothing else."
    return Task(prompt, finish, files, steps, [Answer(f"{top} {counted[top]}")], answer_from_output=True)


def build(difficulty: str, rng: random.Random) -> Task:
    """easy: count lines with a substring; medium: whole-word, case-blind count over a filtered tree; hard: top word."""
    return {"easy": _substring, "medium": _whole_word, "hard": _top_word}[difficulty](rng)
