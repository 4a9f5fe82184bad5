"""`--help` of every `hiwater` command reads well on an 80-column terminal (issue #13): no
line wider than 80 columns, no option name or choice cut short with an ellipsis, and the
top-level help says where to start."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from harness.cli import app


def _commands(group: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out = [path]
    for name, cmd in sorted(getattr(group, "commands", {}).items()):
        out.extend(_commands(cmd, (*path, name)))
    return out


COMMANDS = _commands(typer.main.get_command(app))


def _help(path: tuple[str, ...]) -> str:
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    return result.output


def test_every_command_is_covered() -> None:
    assert {("campaign",), ("report",), ("spec", "check"), ("cluster", "up")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "hiwater")
def test_help_fits_80_columns(path: tuple[str, ...]) -> None:
    text = _help(path)
    too_wide = [ln for ln in text.splitlines() if len(ln) > 80]
    assert not too_wide, "\n".join(too_wide)
    assert "…" not in text, text


def test_campaign_help_groups_options_and_lists_choices() -> None:
    text = _help(("campaign",))
    for panel in ("Cluster", "Workload", "Faults", "Output"):
        assert f"─ {panel} ─" in text
    for choice in ("crash-leader-then-successor", "isolated-leaders-crash", "lose-unflushed",
                   "isolate-leader", "controller"):
        assert choice in text


def test_top_level_help_says_where_to_start() -> None:
    text = _help(())
    start = text.index("Start here")
    assert start < text.index("hiwater campaign") < text.index("hiwater report") \
        < text.index("hiwater spec check")
