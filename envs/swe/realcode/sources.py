"""The pinned open-source packages the real-code swe families are mined from (one family per package).

Each pin is a source distribution on PyPI: its exact version and the sha256 of the sdist file, where the
importable package and its tests sit inside the unpacked sdist. Packages are small, pure Python, and their
tests run offline with only pytest and the standard library.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Source:
    """One pinned sdist and its layout."""

    name: str  # the PyPI name
    version: str
    sha256: str  # of the sdist file
    package: str  # the import name, also the folder the workspace holds it under
    package_dir: str  # that folder's path inside the unpacked sdist
    tests_dir: str  # the test folder's path inside the unpacked sdist
    topic: str  # a short noun phrase for the env description
    drop: tuple[str, ...] = ()  # test files left out of the workspace (written for an older pytest)
    long: bool = True  # whether its held-out files hold enough separate bugs for the three-bug tier
    # whether its bugs' symptoms tell them apart: when many bugs misbehave alike on the few calls there are,
    # held-out hard issues repeat training ones word for word
    hard: bool = True

    @property
    def family(self) -> str:
        """The env family: the PyPI name in the form env ids allow."""
        return self.name.lower().replace("_", "-")

    @property
    def stem(self) -> str:
        """The unpacked sdist's top folder."""
        return f"{self.name}-{self.version}"

    @property
    def workspace_tests(self) -> str:
        """Where the tests sit in a workspace: inside the package when the sdist ships them there."""
        inside = self.package_dir + "/"
        return self.package + "/" + self.tests_dir[len(inside):] if self.tests_dir.startswith(inside) else "tests"


SOURCES: tuple[Source, ...] = (
    Source("boltons", "24.1.0", "4a49b7d57ee055b83a458c8682a2a6f199d263a8aa517098bda9bab813554b87",
           "boltons", "boltons", "tests", "general utilities (strings, iterables, dicts, URLs, tables)",
           drop=("conftest.py",)),
    Source("funcy", "2.0", "3963315d59d41c6f30c04bc910e10ab50a3ac4a225868bfa96feed133df075cb",
           "funcy", "funcy", "tests", "functional tools for sequences, collections and strings", long=False,
           hard=False),
    Source("idna", "3.10", "12f65c9b470abda6dc35cf8e63cc574b1c52b11df2c86030af0ac09b01b13ea9",
           "idna", "idna", "tests", "internationalised domain names (IDNA 2008, UTS 46)", long=False),
    Source("markdown", "3.7", "2ae2471477cfd02dbbf038d5d9bc226d40def84b4fe2986e49b59b6b472bbed2",
           "markdown", "markdown", "tests", "a Markdown to HTML converter and its extensions"),
    Source("mistune", "3.0.2", "fc7f93ded930c92394ef2cb6f04a8aabab4117a91449e72dcc8dfa646a508be8",
           "mistune", "src/mistune", "tests", "a Markdown parser and renderers"),
    Source("more-itertools", "10.5.0", "5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6",
           "more_itertools", "more_itertools", "tests", "iterator building blocks"),
    Source("pydash", "8.0.4", "a33fb17b4b06c617da5c57c711605d2dc8723311ee5388c8371f87cd44bf4112",
           "pydash", "src/pydash", "tests", "utility functions for lists, dicts, strings and numbers"),
    Source("semver", "3.0.2", "6253adb39c70f6e51afed2fa7152bcd414c411286088fb4b9effb133885ab4cc",
           "semver", "src/semver", "tests", "semantic version parsing and comparison", long=False),
    Source("sqlparse", "0.5.1", "bb6b4df465655ef332548e24f08e205afc81b9ab86cb1c45657a7ff173a3a00e",
           "sqlparse", "sqlparse", "tests", "a non-validating SQL parser and formatter", hard=False),
    Source("toolz", "1.0.0", "2c86e3d9a04798ac556793bced838816296a2f085017664e4995cb40a1047a02",
           "toolz", "toolz", "toolz/tests", "functional utilities for iterators, functions and dicts"),
    Source("validators", "0.34.0", "647fe407b45af9a74d245b943b18e6a816acf4926974278f6dd617778e1e781f",
           "validators", "src/validators", "tests", "validation of e-mails, URLs, hashes and other strings"),
    Source("webcolors", "24.8.0", "08b07af286a01bcd30d583a7acadf629583d1f79bfef27dd2c2c5c263817277d",
           "webcolors", "src/webcolors", "tests", "HTML and CSS colour names and values", long=False),
)


def source(family: str) -> Source:
    """The pin of a real-code family; an unknown name raises naming the known ones."""
    for pin in SOURCES:
        if pin.family == family:
            return pin
    raise ValueError(f"unknown real-code swe family {family!r}; known: {', '.join(p.family for p in SOURCES)}")
