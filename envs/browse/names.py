"""Fictional names for every kind of entity, unique within their kind, and near-duplicates of them."""
from __future__ import annotations

import random

ONSETS = ("b", "br", "c", "d", "dr", "f", "g", "gr", "h", "k", "kr", "l", "m", "n", "p", "r", "s", "st", "t", "th", "tr", "v", "w", "z")
VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou")
CODAS = ("", "", "n", "r", "l", "s", "nd", "rn", "x", "ck", "th")
GIVEN = (
    "Ada", "Alma", "Bodil", "Bram", "Cora", "Cyrus", "Dagny", "Dora", "Edda", "Emil", "Felix", "Freya", "Gideon",
    "Greta", "Hedda", "Hugo", "Ilse", "Ivo", "Jonas", "Juno", "Kaia", "Kasimir", "Leona", "Lorne", "Magnus", "Mira",
    "Nils", "Nora", "Odile", "Otto", "Pavel", "Quinn", "Rhea", "Soren", "Tilde", "Ulla", "Viggo", "Wren", "Yara", "Zeno",
)
TOWN_ENDINGS = ("by", "ford", "holm", "wick", "stead", "mouth", "ton", "haven", "dale", " Bridge", " Cross")
REGION_ENDINGS = ("mark", "land", " Vale", "shire", " Reach")
CLUB_ENDINGS = ("Rovers", "Athletic", "United", "Wanderers", "Rangers", "Harriers")
ALBUM_WORDS = (
    ("Glass", "Silent", "Paper", "Hollow", "Amber", "Northern", "Velvet", "Broken", "Golden", "Quiet", "Crimson",
     "Distant", "Iron", "Summer", "Winter", "Electric", "Pale", "Wild"),
    ("Harbor", "Orchard", "Lanterns", "Rivers", "Signals", "Gardens", "Horizon", "Echoes", "Tides", "Engines",
     "Letters", "Mirrors", "Stations", "Fields", "Wires", "Harvest", "Storms", "Bridges"),
)
# Each industry names its companies and what they make.
INDUSTRIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "motor vehicles": (("Motors", "Automobiles"), ("Roadster", "Coupe", "Tractor", "Van", "Tourer")),
    "optics": (("Optics", "Optical"), ("Lens", "Telescope", "Camera", "Microscope")),
    "electrical goods": (("Electric", "Electrical Works"), ("Lamp", "Radio", "Kettle", "Fan")),
    "textiles": (("Textiles", "Mills"), ("Loom", "Cloth", "Spinner")),
    "chemicals": (("Chemicals", "Chemical Works"), ("Dye", "Resin", "Solvent", "Polish")),
    "food": (("Foods", "Bakeries"), ("Biscuit", "Preserve", "Cordial", "Cracker")),
    "instruments": (("Instruments", "Precision"), ("Barometer", "Compass", "Meter", "Clock")),
}
LABEL_INDUSTRY = "recorded music"
LABEL_ENDINGS = ("Records", "Recordings")
OCCUPATIONS = ("engineer", "industrialist", "chemist", "inventor", "merchant", "architect", "physician", "teacher", "coach", "banker")
MUSICIANS = ("musician", "singer", "composer", "guitarist", "pianist")
SPORTS = ("football", "rugby", "hockey", "basketball", "handball", "cricket")


def coin(rng: random.Random, syllables: int = 2) -> str:
    """A made-up capitalised word of a few syllables."""
    word = "".join(rng.choice(ONSETS) + rng.choice(VOWELS) for _ in range(syllables)) + rng.choice(CODAS)
    return word.capitalize()


class Namer:
    """Draws names kind by kind, never giving the same name twice within a kind."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used: dict[str, set[str]] = {}

    def claim(self, kind: str, name: str) -> bool:
        """Reserve `name` for `kind`; False when that kind already has it."""
        taken = self.used.setdefault(kind, set())
        if name.lower() in taken:
            return False
        taken.add(name.lower())
        return True

    def _unique(self, kind: str, draw) -> str:
        for _ in range(1000):
            name = draw()
            if self.claim(kind, name):
                return name
        raise RuntimeError(f"ran out of fresh {kind} names")

    def person(self) -> str:
        """A given name and a made-up surname."""
        return self._unique("person", lambda: f"{self.rng.choice(GIVEN)} {coin(self.rng)}")

    def town(self) -> str:
        """A made-up town name with a place-like ending."""
        return self._unique("town", lambda: coin(self.rng) + self.rng.choice(TOWN_ENDINGS))

    def region(self) -> str:
        """A made-up region name."""
        return self._unique("region", lambda: coin(self.rng) + self.rng.choice(REGION_ENDINGS))

    def river(self) -> str:
        """A made-up river name ending in 'River'."""
        return self._unique("river", lambda: f"{coin(self.rng)} River")

    def company(self, industry: str, stem: str | None = None) -> str:
        """A company name fitting its industry (optionally built on a given stem, e.g. a town's name)."""
        endings = LABEL_ENDINGS if industry == LABEL_INDUSTRY else INDUSTRIES[industry][0]
        return self._unique("company", lambda: f"{stem or coin(self.rng)} {self.rng.choice(endings)}")

    def product(self, industry: str) -> str:
        """A product name: a made-up brand and what the industry makes."""
        return self._unique("product", lambda: f"{coin(self.rng)} {self.rng.choice(INDUSTRIES[industry][1])}")

    def club(self) -> str:
        """A sports-club name."""
        return self._unique("club", lambda: f"{coin(self.rng)} {self.rng.choice(CLUB_ENDINGS)}")

    def album(self, borrowed: str | None = None) -> str:
        """An album title from two evocative words, or a borrowed name (a namesake of another page)."""
        if borrowed is not None and self.claim("album", borrowed):
            return borrowed
        return self._unique("album", lambda: f"{self.rng.choice(ALBUM_WORDS[0])} {self.rng.choice(ALBUM_WORDS[1])}")

    def near_duplicate(self, kind: str, name: str) -> str:
        """A fresh name of `kind` one small edit away from `name` (a vowel changed, a letter doubled or added)."""
        return self._unique(kind, lambda: _edit(name, self.rng))


def _edit(name: str, rng: random.Random) -> str:
    words = name.split(" ")
    # Edit the longest word so the result still reads as the same family of name.
    i = max(range(len(words)), key=lambda j: len(words[j]))
    word = words[i]
    how = rng.randrange(3)
    if how == 0:
        spots = [k for k, ch in enumerate(word) if ch in "aeiou" and k > 0]
        if spots:
            k = rng.choice(spots)
            word = word[:k] + rng.choice([v for v in "aeiou" if v != word[k]]) + word[k + 1:]
        else:
            how = 2
    if how == 1:
        k = rng.randrange(2, len(word) + 1)
        word = word[:k] + word[k - 1] + word[k:]
    if how == 2:
        word = word + rng.choice("enys")
    words[i] = word
    return " ".join(words)
