"""A duration has one reader, `engine.model.config.parse_duration_ns`: Aeron properties, scenario files (TOML and
datadriven), ``--until``/``--tolerance``/``--window``, the TUI's ``time`` jump and checks all read "2.5s" alike,
and refuse what is not a duration in their own words."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cli.app import run
from cli.tui.app import parse_jump
from engine.model.config import Config, format_duration, parse_duration_ns
from engine.scenario import World, run_command
from recorder.checks import parse_check
from recorder.export_scenario import ExportError, parse_window
from recorder.simulate.scenario import ScenarioError
from recorder.simulate.scenario import parse_duration_ns as scenario_duration_ns
from tests.conftest import ROOT

MS = 1_000_000
SECOND = 1_000_000_000


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        (7, 7),  # an int is nanoseconds
        ("7", 7),  # so is a number without a unit (Agrona's rule)
        ("10ns", 10),
        ("500us", 500_000),
        ("500µs", 500_000),
        ("200ms", 200 * MS),
        ("1s", SECOND),
        ("1S", SECOND),  # Agrona reads units in any case
        (" 200 ms ", 200 * MS),
        ("2.5s", 2_500 * MS),
        ("1.1s", 1_100 * MS),  # exact decimals, not a float's neighbour
        ("0.5us", 500),
        ("1m", 60 * SECOND),
        ("-5ms", -5 * MS),  # range is the caller's to check
    ],
)
def test_a_duration_is_a_number_and_a_unit(text, ns):
    assert parse_duration_ns(text) == ns


@pytest.mark.parametrize("text", ["", "soon", "5 parsecs", "1.5ns", "1.0000000001s", "1e3ms", "٣s", "1 s s", True, 1.5, None])
def test_what_is_not_a_whole_number_of_nanoseconds_is_a_value_error(text):
    with pytest.raises(ValueError, match="duration|whole number of nanoseconds"):
        parse_duration_ns(text)


@given(st.integers(-(10**15), 10**15))
def test_a_formatted_duration_reads_back_exactly(ns):
    text = format_duration(ns)
    assert parse_duration_ns(text) == ns
    assert text.endswith(("s", "ms", "us", "ns"))


def test_every_front_end_reads_the_same_duration():
    assert Config.from_properties({"aeron.cluster.election.timeout": "2.5s"}).election_timeout_ns == 2_500 * MS
    assert scenario_duration_ns("2.5s", key="duration") == 2_500 * MS
    world = World()
    run_command(world, "advance 2.5s")
    assert world.now == 2_500 * MS
    assert parse_jump("time 2.5s").value == 2_500 * MS and parse_jump("t 7").value == 7
    assert parse_window("2.5s..3s") == (2_500 * MS, 3 * SECOND)
    summary = {"kind": "summary", "ts": 2_500 * MS, "nodes": {"0": {}}}
    assert parse_check("longest_leaderless() == 2.5s").evaluate([{"kind": "state", "ts": 0, "node": 0, "to": "CANVASS"}, summary])


def test_each_front_end_refuses_a_bad_duration_in_its_own_words():
    with pytest.raises(ValueError, match="aeron.cluster.election.timeout: expected a duration"):
        Config.from_properties({"aeron.cluster.election.timeout": "soon"})
    with pytest.raises(ScenarioError, match="key 'duration'.*expected a duration such as"):
        scenario_duration_ns("soon", key="duration", source="a.toml")
    with pytest.raises(ScenarioError, match="expected a positive duration"):
        scenario_duration_ns("0s", key="duration", allow_zero=False)
    with pytest.raises(ScenarioError, match="expected a non-negative duration"):
        scenario_duration_ns("-1s", key="duration")
    with pytest.raises(ValueError, match="time takes nanoseconds or a duration"):
        parse_jump("time soon")
    with pytest.raises(ExportError, match="--window: expected durations"):
        parse_window("soon..")


@pytest.mark.parametrize(
    "argv",
    [
        ["replay", "{sample}", "--until", "soon"],
        ["replay", "{sample}", "--tolerance", "1.5ns"],
        ["diff", "{sample}", "--model", "1.41.0", "--model", "1.47.3", "--tolerance", "soon"],
        ["bisect", "{sample}", "--good", "1.47.3", "--bad", "1.41.0", "--check", "leader_elected", "--until", "x"],
    ],
)
def test_a_bad_time_option_is_a_usage_error_naming_the_option(argv, capsys):
    sample = str(ROOT / "samples" / "clean-start" / "incident.arrow")
    assert run([a.replace("{sample}", sample) for a in argv]) == 2
    err = capsys.readouterr().err.strip()
    option = next(a for a in argv if a in ("--until", "--tolerance"))
    assert err.count("\n") == 0 and f"Invalid value for '{option}'" in err
    assert "expected a duration" in err or "is not a whole number of nanoseconds" in err


def test_a_time_option_before_the_first_event_is_said_back_as_a_duration(capsys):
    sample = str(ROOT / "samples" / "clean-start" / "incident.arrow")
    assert run(["replay", sample, "--until", "0.2s"]) == 2
    assert "--until 200ms: before the first event" in capsys.readouterr().err
