"""Turn free text into URL slugs, shorten long strings for display, and take initials."""


def slugify(text, sep="-", max_length=None):
    """Lower-case `text`, keep runs of letters and digits, and join them with `sep`."""
    words = []
    current = []
    for char in text.lower():
        if char.isalnum():
            current.append(char)
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    slug = sep.join(words)
    if max_length is not None and len(slug) > max_length:
        slug = slug[:max_length].rstrip(sep)
    return slug


def truncate(text, width, ellipsis="..."):
    """Shorten `text` to at most `width` characters, ending with `ellipsis` when it was cut."""
    if width < len(ellipsis):
        raise ValueError(f"width {width} is shorter than the ellipsis {ellipsis!r}")
    if len(text) <= width:
        return text
    return text[: width - len(ellipsis)] + ellipsis


def initials(name, limit=3):
    """The upper-case first letters of the first `limit` words of `name` ('Ada Lovelace' -> 'AL')."""
    letters = [word[0].upper() for word in name.split() if word[0].isalpha()]
    return "".join(letters[:limit])
