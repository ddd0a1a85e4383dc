"""Greedy word wrapping and padding of text to a fixed width."""


def wrap(text, width):
    """Split `text` into lines of at most `width` characters, breaking between words; longer words stand alone."""
    if width < 1:
        raise ValueError(f"width must be positive, got {width}")
    lines = []
    line = ""
    for word in text.split():
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line = line + " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def center(text, width, fill=" "):
    """Pad `text` on both sides to `width`; an odd leftover goes to the right side."""
    if len(fill) != 1:
        raise ValueError(f"fill must be one character, got {fill!r}")
    missing = width - len(text)
    if missing <= 0:
        return text
    left = missing // 2
    return fill * left + text + fill * (missing - left)


def justify(words, width):
    """Join `words` into exactly `width` characters, spreading the spaces evenly (extra ones to the left gaps)."""
    if len(words) == 1:
        return words[0].ljust(width)
    gaps = len(words) - 1
    spaces = width - sum(len(word) for word in words)
    base, extra = divmod(spaces, gaps)
    out = ""
    for i, word in enumerate(words[:-1]):
        out += word + " " * (base + (1 if i < extra else 0))
    return out + words[-1]
