"""Shell-style wildcard matching: '*' matches any run of characters, '?' exactly one."""


def match(pattern, text):
    """Whether all of `text` matches `pattern`."""
    # ok[j]: pattern[:i] matches text[:j], row by row over the pattern.
    ok = [True] + [False] * len(text)
    for char in pattern:
        if char == "*":
            for j in range(1, len(text) + 1):
                ok[j] = ok[j] or ok[j - 1]
        else:
            for j in range(len(text), 0, -1):
                ok[j] = ok[j - 1] and (char == "?" or char == text[j - 1])
            ok[0] = False
    return ok[len(text)]


def select(pattern, names):
    """The names that match, in their original order."""
    return [name for name in names if match(pattern, name)]


def literal_prefix(pattern):
    """The part of the pattern before its first wildcard."""
    for i, char in enumerate(pattern):
        if char in "*?":
            return pattern[:i]
    return pattern
