"""The words, names and places the terminal task generators draw their file contents from."""
from __future__ import annotations

import random

WORDS = (
    "apple anchor april arrow autumn badge baker balance banner basket battery beacon berry blanket "
    "border bottle branch bridge bucket butter cabin camera candle canvas carbon castle cellar chalk "
    "channel cherry circle cliff clock cloud copper cotton crane crystal curtain daisy desert diamond "
    "dinner dragon drum eagle echo engine estate fabric falcon feather fence field filter flame forest "
    "fossil fountain garden garlic ginger glacier globe granite gravel harbor harvest helmet hollow "
    "honey horizon island ivory jacket jungle kernel kettle ladder lantern lemon letter linen lizard "
    "marble meadow melody mirror mountain needle object ocean olive orbit orchard paddle palace paper "
    "pepper pillow planet pocket powder prairie puzzle quartz rabbit radar ribbon river rocket saddle "
    "salmon sandal season shadow shelter signal silver socket spider spiral spring statue stream "
    "summer sunset switch tablet teapot temple thunder ticket timber tomato tower trumpet tunnel "
    "valley velvet violin voyage wagon walnut window winter wizard yellow zipper"
).split()

SHORT_WORDS = "a an the of to in on at by for with and or but is was are it as from".split()

FIRST_NAMES = (
    "Ada Bruno Clara Dmitri Elena Farid Greta Hugo Ines Jonas Kira Lars Maya Nils Olga Pavel Quinn "
    "Rosa Sven Tara Umar Vera Wim Xenia Yusuf Zofia Amir Bea Cyril Dana Emil Fay Gil Hana Ivo Jade"
).split()

LAST_NAMES = (
    "Abbott Berg Castro Dahl Eklund Fischer Garcia Holm Ivanova Jansen Keller Lind Moreau Novak "
    "Ortiz Petrov Quist Rossi Sato Tanaka Ulrich Varga Weber Young Zimmer Bauer Costa Dubois"
).split()

CITIES = "Aurora Bayview Cedarton Dunmore Elmstead Fairport Glenwood Harlow Ironbridge Juniper Kingsley Lakeside".split()

REGIONS = ("north", "south", "east", "west", "central")

CATEGORIES = ("garden", "kitchen", "office", "outdoor", "toys", "tools")


def words(rng: random.Random, count: int, pool: tuple[str, ...] | list[str] = WORDS) -> list[str]:
    """`count` distinct words from `pool`."""
    return rng.sample(list(pool), count)


def sentence(rng: random.Random, low: int = 5, high: int = 11) -> str:
    """A lowercase sentence of vocabulary and filler words, capitalised, with a full stop."""
    parts = [rng.choice(WORDS) if rng.random() < 0.6 else rng.choice(SHORT_WORDS) for _ in range(rng.randint(low, high))]
    return " ".join(parts).capitalize() + "."


def person(rng: random.Random) -> str:
    """A 'First Last' name."""
    return f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"


def people(rng: random.Random, count: int) -> list[str]:
    """`count` distinct 'First Last' names."""
    names: list[str] = []
    while len(names) < count:
        name = person(rng)
        if name not in names:
            names.append(name)
    return names
