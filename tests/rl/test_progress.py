"""Progress display: plain lines off a terminal (first item, about every tenth, last), a bar on one."""
import io
import re

import pytest
from rich.console import Console
from rich.table import Table

from jointrl.rl.progress import Progress, clock, output_console, rate_text


def plain_console() -> Console:
    return Console(file=io.StringIO(), soft_wrap=True)


def counts(text: str, label: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(rf"^{label} (\d+)/(\d+) ", text, flags=re.M)]


def test_plain_lines_on_the_first_item_every_tenth_and_the_last():
    console = plain_console()
    with Progress(console, "SFT", 25) as progress:
        for i in range(25):
            progress.advance(info=f"loss {i}")
    text = console.file.getvalue()
    # ceil(25 / 10) = 3 items between lines, counted from the last line printed.
    assert counts(text, "SFT") == [(n, 25) for n in (1, 4, 7, 10, 13, 16, 19, 22, 25)]
    lines = text.splitlines()
    assert all(" step/s" in line or " s/step" in line for line in lines)
    assert all("| ETA " in line and "| elapsed " in line for line in lines)
    assert lines[0].endswith("| loss 0") and lines[-1].startswith("SFT 25/25 (100%)") and lines[-1].endswith("loss 24")
    assert "\x1b[" not in text  # no terminal control codes in a log


def test_a_resumed_loop_counts_from_where_it_was():
    console = plain_console()
    with Progress(console, "RL", 20, completed=12) as progress:
        for _ in range(8):
            progress.advance()
    assert counts(console.file.getvalue(), "RL") == [(13, 20), (14, 20), (15, 20), (16, 20), (17, 20), (18, 20),
                                                    (19, 20), (20, 20)]


def test_no_console_shows_nothing_but_still_counts():
    with Progress(None, "eval", 3, unit="episode") as progress:
        progress.advance(3)
    assert progress.done == 3


def test_a_terminal_gets_a_bar_and_nested_loops_share_one_display():
    console = Console(file=io.StringIO(), force_terminal=True, width=140)
    with Progress(console, "RL", 2) as outer:
        for _ in range(2):
            with Progress(console, "eval", 3, unit="episode") as inner:
                inner.advance(3)
            outer.advance(info="reward 0.500")
    text = console.file.getvalue()
    assert "━" in text and "2/2" in text and "reward 0.500" in text
    assert not counts(text, "RL")  # no plain lines on a terminal


def test_clock_and_rate_text():
    assert clock(3725) == "1:02:05" and clock(None) == "?"
    assert rate_text(4.0, "step") == "4.00 step/s"
    assert rate_text(0.25, "episode") == "4.0 s/episode"
    assert rate_text(None, "step") == "?"


def test_completed_beyond_the_total_is_refused():
    with pytest.raises(ValueError, match="completed <= total"):
        Progress(None, "RL", 3, completed=4)


def test_a_piped_command_prints_whole_env_ids_and_intervals(capsys):
    # Under pytest stdout is captured, as in a pipe: rich's default 80 columns would cut the names to "terminal…".
    table = Table()
    for name in ("family", "tasks", "episodes", "SFT", "RL", "change", "95% CI", "significant"):
        table.add_column(name)
    table.add_row("terminal/text-count-v0:easy", "32", "128", "0.594", "0.766", "+0.172", "[+0.086, +0.266]", "up")
    output_console().print(table)
    out = capsys.readouterr().out
    assert "terminal/text-count-v0:easy" in out and "[+0.086, +0.266]" in out and "significant" in out
