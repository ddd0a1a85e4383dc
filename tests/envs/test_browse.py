"""The browse domain against independent expectations: answers re-derived from the rendered pages by brute
force, answer normalisation, search, find (regex bombs included), pagination and signals."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from jointrl.envs import registry
from jointrl.envs.browse import DIFFICULTIES, FAMILIES, LONG_FAMILIES
from jointrl.envs.browse.answers import matches, normalize
from jointrl.envs.browse.find import LINE
from jointrl.envs.browse.pages import CENSUS_YEAR, Page
from jointrl.envs.browse.programs import follow
from jointrl.envs.browse.questions import FAMILIES as SAMPLED_FAMILIES
from jointrl.envs.browse.questions import spread
from jointrl.envs.browse.schema import ATTRS, EVENTS, RELATIONS

IDS = registry.env_ids("browse/*")
LINK = re.compile(r"\[([^\]]+)\]\((wiki://[^)]+)\)")


def _env(env_id, seed):
    env = registry.make(env_id)
    env.reset(seed)
    return env


def _call(env, name, **arguments):
    return env.step({"id": "t", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}})


# Reading the site as the agent sees it: every numbered page through `open`, parsed back into facts.


def _document(env, url):
    lines, page = [], 1
    while True:
        text = env.open(url, page)
        header, _, rest = text.partition("\n\n")
        body, _, footer = rest.rpartition("\n\n")
        assert re.search(rf" — {re.escape(url)} — page {page} of \d+$", header), header
        lines += body.split("\n")
        if footer.endswith("end]"):
            return lines
        page += 1


def _parse(lines):
    page = {"facts": {}, "links": {}, "lists": {}, "hatnote": []}
    section = None
    for line in lines:
        if line.startswith("# "):
            page["title"] = line[2:]
        elif line.startswith("Not to be confused with"):
            page["hatnote"] = [url for _, url in LINK.findall(line)]
        elif line and not line.startswith(" "):
            section = line
            if section not in ("Facts", "History"):
                page["lists"][section] = []
        elif section == "Facts" and line.strip():
            label, _, value = line.strip().partition(": ")
            found = LINK.fullmatch(value)
            target = page["links"] if found else page["facts"]
            assert label not in target, f"{page['title']}: {label} twice in its Facts box"
            target[label] = found.group(2) if found else value
        elif section in page["lists"] and line.startswith("  - "):
            (_, url), = LINK.findall(line.split(" — ")[0])
            shown = dict(part.split(": ") for part in line.split(" — ")[1].split("; ")) if " — " in line else {}
            page["lists"][section].append((url, shown))
    page["type"] = page["facts"].pop("Type")
    suffix = f" ({page['type']})"
    page["name"] = page["title"][: -len(suffix)] if page["title"].endswith(suffix) else page["title"]
    return page


def _site(env):
    return {url: _parse(_document(env, url)) for url in env.pages}


# An evaluator of question programs written against the parsed pages only.


def _number(text):
    return int(text.replace(",", ""))


def _figure(site, url, attr):
    value = site[url]["facts"][ATTRS[attr].label]
    return _number(value) if ATTRS[attr].numeric else value


def _follow(site, ref):
    url = ref["anchor"]
    for rel in ref["path"]:
        url = site[url]["links"][RELATIONS[rel].label]
    return url


def _members(site, owner, relation):
    """Brute force: every page of the source kind whose link points at the owner."""
    rel = RELATIONS[relation]
    found = sorted(u for u, p in site.items() if p["type"] == rel.source and p["links"].get(rel.label) == owner)
    printed = sorted(u for u, _ in site[owner]["lists"].get(rel.heading, []))
    assert found == printed, f"the list on {owner} disagrees with the pages that link to it"
    return found


def _meets(site, url, where):
    value = _figure(site, url, where["attr"])
    return value < where["value"] if where["op"] == "<" else value > where["value"]


def _expected(site, p):
    family = p["family"]
    if family == "lookup":
        return _figure(site, _follow(site, p["ref"]), p["attr"])
    if family == "chain":
        return site[_follow(site, p["ref"])]["name"]
    if family in ("compare", "difference"):
        a, b = (_follow(site, r) for r in p["refs"])
        attrs = p["attrs"] if family == "difference" else [p["attr"]] * 2
        va, vb = _figure(site, a, attrs[0]), _figure(site, b, attrs[1])
        assert a != b and va != vb, "a comparison or difference between equal figures"
        if family == "difference":
            return abs(va - vb)
        return site[a if (va < vb) == (p["pick"] == "min") else b]["name"]
    if family == "age":
        event = _follow(site, p["ref"])
        relation, attr, _, _ = EVENTS[site[event]["type"]]
        person = site[event]["links"][RELATIONS[relation].label]
        if p["since"] == "born":
            return _figure(site, event, attr) - _figure(site, person, "born")
        return _figure(site, event, attr) - _figure(site, site[person]["links"]["Birthplace"], "founded")
    owner = _follow(site, p["owner"])
    members = _members(site, owner, p["relation"])
    if family == "count":
        return sum(1 for m in members if p["where"] is None or _meets(site, m, p["where"]))
    if family == "aggregate":
        return sum(_figure(site, m, p["attr"]) for m in members)
    if family == "trail":
        person_label = RELATIONS[EVENTS[RELATIONS[p["relation"]].source][0]].label
        towns = {site[site[m]["links"][person_label]]["links"]["Birthplace"] for m in members}
        return sum(_figure(site, t, "population") for t in towns)
    if family == "ordinal":
        values = sorted((_figure(site, m, p["attr"]) for m in members), reverse=p["order"] == "desc")
        assert len(set(values[:p["k"] + 1])) == p["k"] + 1, "a tie at or above the rank makes it ambiguous"
        ranked = sorted(members, key=lambda m: _figure(site, m, p["attr"]), reverse=p["order"] == "desc")
        return site[ranked[p["k"] - 1]]["name"]
    assert family == "intersection"
    kind = RELATIONS[p["relation"]].source
    everyone = [u for u, page in site.items() if page["type"] == kind]
    both = [u for u in everyone if u in members and _meets(site, u, p["where"])]
    threshold_only = [u for u in everyone if _meets(site, u, p["where"])]
    assert len(both) == 1, f"{len(both)} entities satisfy both conditions"
    assert len(members) >= 2 and len(threshold_only) >= 2, "one condition alone already decides"
    return site[both[0]]["name"]


def test_every_family_at_every_difficulty_is_registered():
    assert set(FAMILIES) | set(LONG_FAMILIES) == set(SAMPLED_FAMILIES) and len(FAMILIES) >= 8
    expected = [f"browse/{f}-v0:{d}" for f in FAMILIES for d in DIFFICULTIES] + [f"browse/{f}-v0:long" for f in LONG_FAMILIES]
    assert IDS == sorted(expected)
    for env_id in IDS:
        spec = registry.spec(env_id)
        assert spec.description and spec.kwargs["family"] in SAMPLED_FAMILIES


@pytest.mark.parametrize("env_id", IDS)
def test_answer_is_unique_and_matches_the_pages(env_id):
    for seed in (0, 7):
        env = _env(env_id, seed)
        site = _site(env)
        titles = [p["title"] for p in site.values()]
        assert len(titles) == len(set(titles)), "two pages share a title"
        question, solution = env.question, env.question.solution
        expected = _expected(site, question.program)
        assert matches(str(expected), solution.answer, solution.numeric, solution.aliases), (question.text, expected, solution.answer)
        assert sum(1 for _ in env._solution()) <= registry.spec(env_id).max_turns
        # The question names each anchor page as that page's name.
        for ref in [question.program.get(k) for k in ("ref", "owner")] + question.program.get("refs", []):
            if ref:
                assert site[ref["anchor"]]["name"] in question.text
        env.close()


def test_difficulty_changes_the_task():
    for family in FAMILIES:
        pages, twins, paginated = {}, {}, {}
        for difficulty in DIFFICULTIES:
            envs = [_env(f"browse/{family}-v0:{difficulty}", seed) for seed in range(6)]
            pages[difficulty] = sum(len(e.question.solution.evidence) for e in envs) / len(envs)
            twins[difficulty] = sum(any(x.twin_of for x in e.world.entities.values()) for e in envs)
            paginated[difficulty] = sum(e.pages[u].count(e.page_lines) > 1 for e in envs for u in e.question.solution.evidence)
        assert pages["easy"] < pages["medium"] < pages["hard"], (family, pages)
        assert twins["easy"] == twins["medium"] == 0 and twins["hard"] == 6, (family, twins)
        assert paginated["easy"] == 0 and paginated["hard"] > 0, (family, paginated)


def test_hard_evidence_pages_have_near_duplicate_twins():
    env = _env("browse/lookup-v0:hard", 3)
    site = _site(env)
    for url in env.question.solution.evidence:
        if site[url]["type"] in ("region", "river"):
            continue
        twins = [u for u in site[url]["hatnote"] if site[u]["type"] == site[url]["type"]]
        assert twins, f"{url} has no near-duplicate"
        name, twin = site[url]["name"], site[twins[0]]["name"]
        assert name != twin and len(name.split()) == len(twin.split()) and abs(len(name) - len(twin)) <= 1


@pytest.mark.parametrize("said, gold, numeric, aliases, expected", [
    ("The Kelvane Motors.", "Kelvane Motors", False, (), True),
    ("  kelvane   MOTORS ", "Kelvane Motors", False, (), True),
    ("Kélvane Motors", "Kelvane Motors", False, (), True),
    ("Kelvane-Motors", "Kelvane Motors", False, (), True),
    ("Kelvane Motor", "Kelvane Motors", False, (), False),
    ("Kelvane Motors Works", "Kelvane Motors", False, (), False),
    ("Marrowby (town)", "Marrowby", False, ("Marrowby (town)",), True),
    ("the", "Kelvane Motors", False, (), False),
    ("", "Kelvane Motors", False, (), False),
    ("45,210", "45210", True, (), True),
    ("45210 inhabitants", "45210", True, (), True),
    ("45210.0", "45210", True, (), True),
    ("45,211", "45210", True, (), False),
    ("1,2", "12", True, (), False),
    ("between 1923 and 1950", "27", True, (), False),
    ("27 years (1950 - 1923)", "27", True, (), False),
    ("twelve", "12", True, (), True),
    ("none", "0", True, (), False),
    ("", "0", True, (), False),
    # Hedging over several candidates is no answer.
    ("Alma Rin or Bram Tol", "Alma Rin", False, (), False),
    ("Alma Rin, Bram Tol", "Alma Rin", False, (), False),
    ("Bram Tol Alma Rin", "Alma Rin", False, (), False),
    ("12 or 13", "12", True, (), False),
    ("12\n13\n14", "13", True, (), False),
])
def test_answer_matching(said, gold, numeric, aliases, expected):
    assert matches(said, gold, numeric, aliases) is expected


def test_normalize_drops_case_punctuation_articles_and_spaces():
    assert normalize("  The Old-Mill,  an  A.B. ") == "old mill b"


def test_search_returns_each_evidence_page_for_its_exact_title():
    for env_id in ("browse/chain-v0:hard", "browse/compare-v0:medium", "browse/aggregate-v0:hard"):
        env = _env(env_id, 1)
        for url in env.question.solution.evidence:
            title = env.pages[url].title
            first = _call(env, "search", query=title).content.split("\n")[1]
            assert first.endswith(f"]({url})"), (title, first)
            # BM25 alone (the title's words in another order, with the kind) still ranks it near the top.
            words = " ".join(reversed(title.split())) + " " + env.world[url].kind
            results = _call(env, "search", query=words, k=3).content.split("\n")[1::2]
            top = [line.rsplit("](", 1)[1][:-1] for line in results]
            assert url in top, (words, top)


def test_search_without_known_words_says_so():
    env = _env("browse/lookup-v0:easy", 0)
    result = _call(env, "search", query="the of and")
    assert result.error is None and result.content.startswith("No page matches")
    result = _call(env, "search", query="zzqxv", k=10)
    assert result.content.startswith("No page matches")


def test_open_paginates_and_bounds_output():
    env = _env("browse/ordinal-v0:hard", 2)
    longest = max(env.pages.values(), key=lambda p: len(p.lines))
    total = longest.count(env.page_lines)
    assert total > 1
    assert _document(env, longest.url) == longest.lines
    for url in env.pages:
        for page in range(1, env.pages[url].count(env.page_lines) + 1):
            assert len(env.open(url, page)) < env.page_lines * (LINE + 1) + 300
        # Lines stay short (find's bound relies on it) and no link is split across two lines.
        assert all(len(line) <= LINE and line.count("[") == len(LINK.findall(line)) for line in env.pages[url].lines)
    assert _call(env, "open", url=longest.url, page=total + 1).error is not None
    missing = _call(env, "open", url=longest.url + "x")
    assert missing.error is not None and longest.url in missing.content


def test_find_literal_and_regex():
    env = _env("browse/lookup-v0:hard", 5)
    assert _call(env, "find", pattern="Founded").error is not None  # nothing open yet
    town = next(e for e in env.world.entities.values() if e.kind == "town" and e.twin_of is None)
    _call(env, "open", url=town.url)
    doc = env.pages[town.url]
    index = next(i for i, line in enumerate(doc.lines) if line.startswith("  Founded: "))
    where = f"page {index // env.page_lines + 1}, line {index % env.page_lines + 1}: Founded: {town.attrs['founded']}"
    assert where in _call(env, "find", pattern="founded:").content
    assert where in _call(env, "find", pattern=r"^\s+Founded: \d{4}$", regex=True).content
    # Literal by default: regex characters are plain text.
    assert _call(env, "find", pattern="Founded: \\d").content.startswith("No line")
    assert "Population (2020 census): " in _call(env, "find", pattern="(2020 census)").content
    assert _call(env, "find", pattern="[unclosed", regex=True).error is not None


def _trapped():
    """An env whose open page is the worst case for backtracking: 100 full-width lines of 'a'."""
    env = _env("browse/lookup-v0:easy", 0)
    env.pages["wiki://trap"] = Page("wiki://trap", "Trap", ["a" * LINE] * 100, 100)
    _call(env, "open", url="wiki://trap")
    return env


@pytest.mark.parametrize("bomb", [
    r"(a+)+$", r"(a*)*b", r"(a|aa)+$", r"(a|a)*b", r"(\w+\s?)+$", r"(.*a){12}", r"(x+x+)+y",
    r".*.*.*.*=", r"a?a?a?a?a?a?a?a?a?a?a?a?aaaaaaaaaaaa", r"[a-z]*[a-z]*[a-z]*!", r"(?=a)a", r"(a)\1",
])
def test_regex_bombs_cannot_hang_find(bomb):
    env = _trapped()
    started = time.process_time()
    result = _call(env, "find", pattern=bomb, regex=True)
    assert time.process_time() - started < 1.0
    assert result.error is not None, f"{bomb!r} was not refused"


@pytest.mark.parametrize("pattern", [r".*a?a?!", r"\d{1,4}.*!", r"a{0,9}a{0,9}!", r"[a-z]+ River"])
def test_allowed_regexes_stay_fast_on_worst_case_lines(pattern):
    env = _trapped()
    started = time.process_time()
    result = _call(env, "find", pattern=pattern, regex=True)
    assert result.error is None and result.content.startswith("No line")
    # CPU time of this process (the tool's thread included), so other jobs on the machine do not count.
    assert time.process_time() - started < 1.0


def test_signals_follow_reading_and_answer():
    env = _env("browse/difference-v0:medium", 4)
    evidence = env.question.solution.evidence
    env.demo()
    signals = env.signals()
    assert signals["success"] == signals["answer_correct"] == signals["evidence_visited"] == 1.0
    assert signals["pages_opened"] == len(evidence) and signals["searches"] >= 1

    partial = _env("browse/difference-v0:medium", 4)
    _call(partial, "open", url=evidence[0])
    partial.answer(str(int(partial.question.solution.answer) + 1))
    signals = partial.signals()
    assert signals["success"] == 0.0 and signals["evidence_visited"] == pytest.approx(1 / len(evidence))
    partial.answer(f"{int(partial.question.solution.answer):,}")
    assert partial.signals()["success"] == 1.0


def test_seeds_give_different_tasks_and_close_is_idempotent():
    texts = set()
    for seed in range(6):
        env = _env("browse/chain-v0:medium", seed)
        texts.add(env.question.text)
        env.close()
        env.close()
    assert len(texts) == 6


def test_same_seed_same_web_in_another_process():
    """Workers (Ray actors) rebuild an episode from its seed: the web must not depend on hash seeds."""
    script = (
        "import hashlib; from jointrl.envs.browse.env import BrowseEnv\n"
        "env = BrowseEnv('hard', family='intersection'); env.reset(9)\n"
        "text = env.question.text + env.question.solution.answer + ''.join(''.join(p.lines) for p in env.pages.values())\n"
        "print(hashlib.sha256(text.encode()).hexdigest())\n"
    )
    digests = {
        subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONHASHSEED": str(h)},
                       capture_output=True, text=True, check=True).stdout
        for h in (1, 2)
    }
    assert len(digests) == 1


# Shortcuts a policy without the skill would take: each must stay closed.


def _passes(env_id, seeds, answer_of):
    """How many of the seeds' episodes an answer (a function of the env) passes without any tool call."""
    wins = 0
    for seed in seeds:
        env = _env(env_id, seed)
        env.answer(answer_of(env))
        wins += env.signals()["success"]
        env.close()
    return wins


def test_spread_takes_every_value_once_per_block_in_shuffled_orders():
    blocks = [[spread(seed, 1, 60) for seed in range(start, start + 60)] for start in (0, 60, 999_960)]
    assert all(sorted(block) == list(range(1, 61)) for block in blocks)
    assert blocks[0] != blocks[1] and blocks[0] != list(range(1, 61))
    # A seed and a seed a million later are as unrelated as two random draws (about 1 in 60 agree).
    assert sum(spread(s, 1, 60) == spread(s + 1_000_000, 1, 60) for s in range(300)) <= 15


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_counts_are_wide_so_no_constant_count_passes(difficulty):
    env_id, seeds = f"browse/count-v0:{difficulty}", range(40)
    answers = [_env(env_id, s).question.solution.answer for s in seeds]
    assert len(set(answers)) >= 30, sorted(answers)
    assert max(int(a) for a in answers) >= 40
    for constant in ("1", "2", "3", "4", "5", max(set(answers), key=answers.count)):
        assert _passes(env_id, seeds, lambda env, c=constant: c) <= 2, constant


def test_threshold_counts_keep_a_long_tail_beyond_the_count():
    """The share of a list meeting the threshold varies widely at a given count, so it cannot give the count away."""
    shares = []
    for seed in range(30):
        env = _env("browse/count-v0:medium", seed)
        members = env.world.members(follow(env.world, env.question.program["owner"]).url, "region")
        shares.append(int(env.question.solution.answer) / len(members))
    assert min(shares) < 0.4 and max(shares) > 0.8


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_compare_is_a_balanced_two_way_choice_between_entities_of_one_kind(difficulty):
    env_id, seeds, first_wins = f"browse/compare-v0:{difficulty}", range(20), 0
    for seed in seeds:
        env = _env(env_id, seed)
        assert env.answer_choices == 2
        refs = env.question.program["refs"]
        a, b = (follow(env.world, ref) for ref in refs)
        # Worded alike, so the wording favours neither: the same links from anchors of one sort, ending at
        # entities of one sort (a label's figures are drawn unlike a manufacturer's, a town's unlike a company's).
        anchors = [env.world[ref["anchor"]] for ref in refs]
        sort = [(e.kind, e.attrs.get("industry") == "recorded music") for e in anchors + [a, b]]
        assert refs[0]["path"] == refs[1]["path"] and sort[0] == sort[1] and sort[2] == sort[3]
        assert a.name != b.name
        first_wins += env.question.solution.answer == a.name
        if difficulty == "easy":
            # Both options are named in the question, the right one as often first as second.
            assert a.name in env.question.text and b.name in env.question.text
        for hedge in (f"{a.name} or {b.name}", f"{b.name}, {a.name}", f"{a.name}\n{b.name}"):
            env.answer(hedge)
            assert env.signals()["success"] == 0.0, hedge
        assert sum(_passes(env_id, [seed], lambda env, n=n: n) for n in (a.name, b.name)) == 1
    assert first_wins == len(seeds) // 2


@pytest.mark.parametrize("family", ["ordinal", "intersection"])
@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_naming_an_entry_of_the_list_at_random_passes_at_most_one_time_in_20(family, difficulty):
    """A policy that opens only the owner's list and names one of its entries is right 1/len(list) of the time."""
    chances = []
    for seed in range(1_000_000, 1_000_008):
        env = _env(f"browse/{family}-v0:{difficulty}", seed)
        owner = follow(env.world, env.question.program["owner"])
        heading = RELATIONS[env.question.program["relation"]].heading
        entries = [env.pages[url].title for url, _ in _parse(_document(env, owner.url))["lists"][heading]]
        wins = 0
        for title in entries:
            env.answer(title)
            wins += env.signals()["success"]
        assert wins == 1, (seed, wins)
        chances.append(wins / len(entries))
        env.close()
    assert sum(chances) / len(chances) <= 0.05


@pytest.mark.parametrize("difficulty", DIFFICULTIES)
def test_age_answers_are_too_spread_for_a_typical_age(difficulty):
    env_id, seeds = f"browse/age-v0:{difficulty}", range(40)
    envs = [_env(env_id, s) for s in seeds]
    answers = [int(env.question.solution.answer) for env in envs]
    # Ages at founding or release sit between 18 and 70, so half the questions (all on hard) count from the
    # founding of the person's birthplace instead: centuries, not decades.
    from_town = sum(env.question.program["since"] == "birthplace" for env in envs)
    assert from_town == (len(seeds) if difficulty == "hard" else len(seeds) // 2)
    assert sum(a > 70 for a in answers) >= from_town // 2
    # The commonest answer of these seeds, and typical ages, tried on other seeds.
    for constant in (max(set(answers), key=answers.count), 30, 35, 40):
        assert _passes(env_id, range(100, 140), lambda env, c=constant: str(c)) <= 2, constant


def test_lookup_and_difference_ask_for_wide_figures_not_words_or_small_counts():
    for difficulty in DIFFICULTIES:
        for seed in range(15):
            env = _env(f"browse/lookup-v0:{difficulty}", seed)
            assert re.fullmatch(r"\d+", env.question.solution.answer)
            # Not a number of tracks (6 to 16) or league titles (0 to 30) either.
            assert not re.search(r"tracks|titles", env.question.text), env.question.text
            env = _env(f"browse/difference-v0:{difficulty}", seed)
            assert not re.search(r"tracks|titles", env.question.text), env.question.text


# The long tier: a trail fanning out from a list to three or more people and their birthplaces.


def _tool_calls(transcript):
    return sum(len(m.get("tool_calls") or []) for m in transcript if m["role"] == "assistant")


def test_long_trail_demo_makes_ten_calls_or_more_and_passes():
    for seed in (0, 1, 2, 1_000_000):
        env = _env("browse/trail-v0:long", seed)
        calls = _tool_calls(env.demo())
        assert env.signals()["success"] == 1.0 and calls >= 10, (seed, calls)
        assert len(env.question.solution.evidence) >= 10
        assert calls <= registry.spec("browse/trail-v0:long").max_turns


def _distractor_figures(site, town):
    """2020-looking populations a careless reader could take for the town's: its twin's, its History's, a census page's."""
    twins = [_number(site[u]["facts"]["Population (2020 census)"]) for u in site[town]["hatnote"] if site[u]["type"] == "town"]
    history = [_number(n) for n in re.findall(r"At the \d{4} census the population was ([\d,]+)", " ".join(_document_lines(site, town)))]
    census = [_number(shown[f"Population ({CENSUS_YEAR} census)"]) for page in site.values() if page["type"] == "census"
              for url, shown in page["lists"]["Towns"] if url == town]
    return {"twin": twins, "history": history, "census": census}


def _document_lines(site, url):
    return site[url]["raw"]


def test_long_trail_answers_read_from_distractor_pages_fail():
    seen = {"twin": 0, "history": 0, "census": 0}
    for seed in range(4):
        env = _env("browse/trail-v0:long", seed)
        site = {url: {**_parse(lines), "raw": lines} for url, lines in ((u, _document(env, u)) for u in env.pages)}
        program = env.question.program
        person_label = RELATIONS[EVENTS[RELATIONS[program["relation"]].source][0]].label
        members = _members(site, _follow(site, program["owner"]), program["relation"])
        towns = sorted({site[site[m]["links"][person_label]]["links"]["Birthplace"] for m in members})
        figures = {t: _number(site[t]["facts"]["Population (2020 census)"]) for t in towns}
        right = sum(figures.values())
        env.answer(str(right))
        assert env.signals()["success"] == 1.0
        for town in towns:
            for kind, wrong in _distractor_figures(site, town).items():
                for figure in wrong:
                    seen[kind] += 1
                    env.answer(str(right - figures[town] + figure))
                    assert env.signals()["success"] == 0.0, (seed, town, kind)
    assert all(seen.values()), seen


@pytest.mark.parametrize("env_id", ["browse/lookup-v0:easy", "browse/chain-v0:easy"])
def test_demo_calls_write_what_they_copy_as_the_same_tokens_as_their_source(env_id):
    """A demo's search query is token for token in the question, and each url it opens in the output before it.

    After a space a name starts on a space-prefixed token, so an unquoted name in the question was no copy a
    small policy could make into the call's JSON string (docs/learning.md).
    """
    from jointrl.model.tokenizer import train_tokenizer
    from jointrl.rl.demos import play_demo

    demos = [play_demo(env_id, seed)[0] for seed in range(30)]
    texts = [m.get("content") or "" for d in demos for m in d.messages[1:]]
    texts += [c["function"]["arguments"] for d in demos for m in d.messages for c in m.get("tool_calls") or []]
    tokenizer = train_tokenizer(texts, 2048)

    def holds(source: str, value: str) -> bool:
        """Whether the tokens of `value` as a JSON string argument are a run of the tokens of `source`."""
        inner = tokenizer.encode(json.dumps({"k": value}))
        start = tokenizer.encode('{"k": "')
        assert inner[:len(start)] == start
        rest = inner[len(start):]
        # The value's own tokens, without the closing quote's (none if the quote merged into its last token).
        wanted = next((rest[:k] for k in range(len(rest), 0, -1) if tokenizer.decode(rest[:k]) == value), None)
        have = tokenizer.encode(source)
        return wanted is not None and any(have[i:i + len(wanted)] == wanted for i in range(len(have)))

    for demo in demos:
        seen = ""
        for message in demo.messages[1:]:
            for call in message.get("tool_calls") or []:
                args = json.loads(call["function"]["arguments"])
                copied = args.get("query") or args.get("url")
                assert holds(seen, copied), f"{copied!r} is not the same tokens in what the demo saw before"
            seen += "\n" + (message.get("content") or "")
