"""Convert identifiers between snake_case and camelCase, and title-case headlines."""

MINOR_WORDS = ("a", "an", "and", "at", "by", "for", "in", "of", "on", "or", "the", "to")


def snake_to_camel(name, upper_first=False):
    """'parse_http_header' -> 'parseHttpHeader' (or 'ParseHttpHeader' with `upper_first`)."""
    parts = [part for part in name.split("_") if part]
    if not parts:
        return ""
    head = parts[0].capitalize() if upper_first else parts[0].lower()
    return head + "".join(part.capitalize() for part in parts[1:])


def camel_to_snake(name):
    """'parseHttpHeader' -> 'parse_http_header'; a run of capitals stays one word ('HTTPServer' -> 'http_server')."""
    out = []
    for i, char in enumerate(name):
        if char.isupper() and i > 0:
            previous_lower = name[i - 1].islower()
            next_lower = i + 1 < len(name) and name[i + 1].islower()
            if previous_lower or (next_lower and name[i - 1].isupper()):
                out.append("_")
        out.append(char.lower())
    return "".join(out)


def title_case(text):
    """Capitalise every word except minor words, which stay lower case unless first or last."""
    words = text.split()
    out = []
    for i, word in enumerate(words):
        if 0 < i < len(words) - 1 and word.lower() in MINOR_WORDS:
            out.append(word.lower())
        else:
            out.append(word[:1].upper() + word[1:].lower())
    return " ".join(out)
