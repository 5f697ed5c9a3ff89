"""The aeron-agent text log: exact round trips against Aeron's tests and a real cluster's logs."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats.agent_log import (
    CLUSTER_EVENT_CODES,
    CLUSTER_EVENTS,
    MAX_CAPTURE_LENGTH,
    AgentLogRecord,
    LogStarted,
    OtherLogLine,
    cluster_event,
    format_log_started,
    format_record,
    format_timestamp,
    parse_line,
    read_agent_log,
)
from formats.errors import DecodeError


def _section_93_lines(reference) -> list[str]:
    """The exact strings (and, with a concrete timestamp, the patterns) of aeron-formats.md §9.3."""
    notes = (reference / "aeron-formats.md").read_text()
    section = notes.split("### 9.3", 1)[1].split("\n## ", 1)[0]
    lines = []
    for code_block in re.findall(r"```\n(.*?)```", section, flags=re.DOTALL):
        lines += [line.replace("[T]", "[1186.223233796]") for line in code_block.splitlines() if line]
    return lines


def test_every_string_of_aerons_own_dissector_and_logger_tests_round_trips(reference):
    lines = _section_93_lines(reference)
    assert len(lines) == 5 + 19
    for line in lines:
        record = parse_line(line)
        assert isinstance(record, AgentLogRecord), line
        assert format_record(record) == line


def test_the_exact_strings_decode_to_typed_fields(reference):
    records = {r.event + str(r.ts_ns): r for r in map(parse_line, _section_93_lines(reference))}
    term = records["NEW_LEADERSHIP_TERM33000000000"]
    assert term.fields["appVersion"] == 300  # printed 0.1.44
    assert term.fields["isStartup"] is True and (term.capture_length, term.length) == (8, 9)
    assert term.truncated
    state = records["STATE_CHANGE-1000000000"]
    assert state.ts_ns == -1_000_000_000 and state.fields == {"memberId": 42, "from": "a", "to": "b"}
    append = records["APPEND_POSITION1186223233796"]
    assert append.fields["flags"] == 1 and append.event_code == 11
    vote = records["REQUEST_VOTE1186223233796"]
    assert vote.fields["protocolVersion"] == (2 << 16) | (5 << 8) | 17
    election = records["ELECTION_STATE_CHANGE1186223233796"]
    assert (election.fields["from"], election.fields["to"]) == ("ERAS", None)  # Java printed null


def test_our_lengths_match_aerons_for_its_logger_test_strings(reference):
    for line in _section_93_lines(reference):
        record = parse_line(line)
        if record.ts_ns != 1186223233796 or record.event == "ELECTION_STATE_CHANGE":
            continue  # the dissector test prints made-up lengths; the election reason is elided
        rebuilt = cluster_event(record.event, record.ts_ns, record.fields)
        assert (rebuilt.capture_length, rebuilt.length) == (record.capture_length, record.length), (
            record.event
        )


def _agent_logs(capture):
    return sorted(capture.glob("node*/agent-events.log"))


def test_every_line_of_the_real_agent_logs_round_trips_byte_for_byte(capture):
    for path in _agent_logs(capture):
        lines = path.read_text().splitlines()
        log = read_agent_log(lines, source=path.name)
        assert log.problems == []
        assert len(log.records) == len(lines)
        for record in log.records:
            assert format_record(record) == lines[record.line_number - 1]


def test_every_cluster_line_of_the_real_logs_is_typed_and_its_lengths_recomputed(capture):
    events: dict[str, int] = {}
    for path in _agent_logs(capture):
        for record in read_agent_log(path.read_text(), source=path.name).records:
            if isinstance(record, AgentLogRecord):
                events[record.event] = events.get(record.event, 0) + 1
                rebuilt = cluster_event(record.event, record.ts_ns, record.fields)
                assert rebuilt == record
            elif isinstance(record, OtherLogLine):
                assert record.context in ("DRIVER", "ARCHIVE")
    assert events["ELECTION_STATE_CHANGE"] == 24 and events["NEW_ELECTION"] == 3
    assert sum(events.values()) == 665


def test_the_real_election_reads_as_states_with_their_positions(capture):
    log = read_agent_log((capture / "node0" / "agent-events.log").read_text())
    assert log.started == LogStarted(
        ts_ns=1184908972446, wall_clock="2026-11-22 01:49:46.563+0000", epoch_ms=1795312186563
    )
    changes = [r for r in log.records if isinstance(r, AgentLogRecord) and r.event == "ELECTION_STATE_CHANGE"]
    assert [(c.fields["from"], c.fields["to"]) for c in changes[:3]] == [
        ("INIT", "CANVASS"),
        ("CANVASS", "NOMINATE"),
        ("NOMINATE", "FOLLOWER_BALLOT"),
    ]
    assert changes[-1].fields["to"] == "CLOSED" and changes[-1].fields["leaderId"] == 1
    term = next(r for r in log.records if isinstance(r, AgentLogRecord) and r.event == "NEW_LEADERSHIP_TERM")
    assert term.fields["appVersion"] == 1 and term.fields["logSessionId"] == -2037162306
    assert term.fields["isStartup"] is False


def test_other_contexts_are_kept_as_raw_lines_with_their_timestamp():
    line = "[1185.613930616] DRIVER: CMD_OUT_COUNTER_READY [12/12]: correlationId=1 counterId=40"
    record = parse_line(line)
    assert record == OtherLogLine(
        ts_ns=1185613930616,
        context="DRIVER",
        event="CMD_OUT_COUNTER_READY",
        capture_length=12,
        length=12,
        text=": correlationId=1 counterId=40",
    )
    assert format_record(record) == line


@pytest.mark.parametrize(
    "line",
    [
        "garbage",
        "[12.5] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT -> ACTIVE",  # nanos not 9 digits
        "[1.000000000] CLUSTER: STATE_CHANGE [22/22]: memberId=x INIT -> ACTIVE",
        "[1.000000000] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT ACTIVE",  # no arrow
        "[1.000000000] CLUSTER: COMMIT_POSITION [24/24]: memberId=0 leadershipTermId=0 logPosition=96",
        "[1.000000000] CLUSTER: CANVASS_POSITION [36/36]: memberId=0 logLeadershipTermId=-1 logPosition=0"
        " leadershipTermId=-1 followerMemberId=2 protocolVersion=1.0.256",
        "[1.000000000] CLUSTER: APPEND_POSITION [25/25]: memberId=1 leadershipTermId=0 logPosition=0"
        " followerMemberId=2 flags=0b0000000",
        "[1.000000000] log started yesterday",
        "[1.000000000] CLUSTER: STATE_CHANGE [022/22]: memberId=0 INIT -> ACTIVE",  # Java prints no leading 0
        "[1.000000000] CLUSTER: COMMIT_POSITION [24/24]: memberId=0 leadershipTermId=-0 logPosition=96 leaderId=1",
        "[-0.000000000] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT -> ACTIVE",
    ],
)
def test_a_malformed_line_raises_decode_error_with_its_line_number(line):
    with pytest.raises(DecodeError) as error:
        parse_line(line, line_number=7, source="node0.log")
    assert str(error.value).startswith("node0.log, line 7: ")
    assert "\n" not in str(error.value)


def test_reading_goes_on_past_malformed_lines_and_skips_blank_ones():
    text = "\n".join(
        [
            "[1.000000000] log started 2026-11-22 01:49:46.563+0000",
            "not a log line",
            "",
            "[2.000000000] CLUSTER: STATE_CHANGE [22/22]: memberId=0 INIT -> ACTIVE",
            "[3.000000000] CLUSTER: STATE_CHANGE [22/22]: memberId=zero INIT -> ACTIVE",
        ]
    )
    log = read_agent_log(text, source="n.log")
    assert [type(r).__name__ for r in log.records] == ["LogStarted", "AgentLogRecord"]
    assert [p.offset for p in log.problems] == [2, 5]


@given(st.text(max_size=120))
def test_any_text_parses_or_raises_decode_error_and_nothing_else(text):
    try:
        record = parse_line(text)
    except DecodeError:
        return
    assert format_record(record) == text.rstrip("\r\n")


@given(st.sampled_from(sorted(CLUSTER_EVENTS)), st.data())
def test_records_we_build_print_and_parse_back_to_themselves(event, data):
    names = [token.partition(":") for token in CLUSTER_EVENTS[event].template.split(" ")]
    fields = {}
    text = st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=40)
    for name, _, kind in names:
        if name == "TRANSITION":
            fields["from"] = data.draw(st.none() | st.sampled_from(["INIT", "CANVASS", "LEADER_READY"]))
            fields["to"] = data.draw(st.none() | st.sampled_from(["NOMINATE", "CLOSED"]))
        elif kind == "bool":
            fields[name] = data.draw(st.booleans())
        elif kind == "version":
            fields[name] = data.draw(st.integers(0, 0xFFFFFF))
        elif kind == "flags":
            fields[name] = data.draw(st.integers(0, 255))
        elif kind == "str":
            fields[name] = data.draw(text)
        else:
            fields[name] = data.draw(st.integers(-(2**63), 2**63 - 1))
    record = cluster_event(event, data.draw(st.integers(0, 2**62)), fields)
    line = format_record(record)
    assert parse_line(line) == record


def test_a_reason_longer_than_300_characters_is_cut_as_aeron_cuts_it():
    fields = {
        "memberId": 1,
        "leadershipTermId": 2,
        "logPosition": 3,
        "appendPosition": 4,
        "reason": "r" * 400,
    }
    record = cluster_event("NEW_ELECTION", 0, fields)
    assert record.fields["reason"] == "r" * 297 + "..."
    assert record.capture_length == record.length == 24 + 4 + 4 + 300


def test_an_event_longer_than_the_capture_limit_is_captured_in_part():
    fields = {
        "memberId": 1,
        "leadershipTermId": 2,
        "logPosition": 3,
        "followerMemberId": 4,
        "catchupEndpoint": "e" * 8200,
    }
    record = cluster_event("CATCHUP_POSITION", 0, fields)
    assert (record.capture_length, record.length) == (MAX_CAPTURE_LENGTH, 24 + 4 + 8200)
    assert record.fields["catchupEndpoint"].endswith("...") and record.truncated
    assert 24 + 4 + len(record.fields["catchupEndpoint"]) == MAX_CAPTURE_LENGTH


def test_timestamps_print_as_seconds_and_nine_digits():
    assert format_timestamp(33_000_000_000) == "[33.000000000]"
    assert format_timestamp(1_186_000_000_007) == "[1186.000000007]"
    assert format_timestamp(-1_000_000_000) == "[-1.000000000]"


def test_a_log_started_line_is_written_and_read_with_its_wall_clock():
    line = format_log_started(1_184_908_972_446, 1_795_312_186_563)
    assert line == "[1184.908972446] log started 2026-11-22 01:49:46.563+0000"
    assert parse_line(line).epoch_ms == 1_795_312_186_563
    offset = parse_line("[0.000000001] log started 2026-11-22 02:49:46.563+0100")
    assert offset.epoch_ms == 1_795_312_186_563


def test_the_event_table_covers_every_cluster_event_code_of_aeron_1_47():
    assert sorted(CLUSTER_EVENT_CODES.values()) == list(range(1, 23))


# --- Dialects: 1.40-1.43 (microseconds, no reason), 1.44-1.49, 1.50 (quoted reasons, versions) -----------------
OLD_STATE_LINE = ("[6199.673798] CLUSTER: ELECTION_STATE_CHANGE [75/75]: memberId=0 INIT -> CANVASS leaderId=-1"
                  " candidateTermId=-1 leadershipTermId=-1 logPosition=0 logLeadershipTermId=-1 appendPosition=0"
                  " catchupPosition=-1")
NEW_ROLE_LINE = '[6001.226887208] CLUSTER: ROLE_CHANGE [33/33]: memberId=1 FOLLOWER -> CANDIDATE reason=""'
NEW_STARTED_LINE = ("[5997.177216352] log started 2026-11-23 20:37:00.122+0000, enabled loggers: {DRIVER: version=1.50.4"
                    " commit=ad55a8de, CLUSTER: version=1.50.4 commit=ad55a8de}")


def test_an_old_line_reads_with_microseconds_and_no_reason_and_prints_back():
    record = parse_line(OLD_STATE_LINE)
    assert record.dialect == "1.40-1.43" and record.ts_ns == 6199_673798_000
    assert "reason" not in record.fields and record.fields["to"] == "CANVASS"
    assert format_record(record) == OLD_STATE_LINE
    assert cluster_event(record.event, record.ts_ns, record.fields, dialect=record.dialect) == record


def test_a_quoted_reason_is_read_without_its_quotes_and_printed_with_them():
    record = parse_line(NEW_ROLE_LINE)
    assert record.dialect == "1.50"
    assert (record.fields["from"], record.fields["to"], record.fields["reason"]) == ("FOLLOWER", "CANDIDATE", "")
    assert format_record(record) == NEW_ROLE_LINE
    assert cluster_event("ROLE_CHANGE", record.ts_ns, record.fields, dialect="1.50").length == 33


def test_the_dialect_and_the_version_are_told_from_the_content():
    new = read_agent_log([NEW_STARTED_LINE, NEW_ROLE_LINE])
    assert new.dialect.name == "1.50" and new.aeron_version == "1.50.4"
    assert format_record(new.records[0]) == NEW_STARTED_LINE
    old = read_agent_log(["[6196.502881] log started 2026-11-23 20:40:19.447+0000", OLD_STATE_LINE])
    assert old.dialect.name == "1.40-1.43" and old.dialect.versions == "1.40–1.43" and old.aeron_version is None
    middle = read_agent_log([format_log_started(1, 1_700_000_000_000), format_record(cluster_event(
        "NEW_ELECTION", 2, {"memberId": 0, "leadershipTermId": -1, "logPosition": 0, "appendPosition": 0,
                            "reason": "node started"}))])
    assert middle.dialect.name == "1.44-1.49" and middle.records[1].fields["reason"] == "node started"


def _version_logs(root):
    return sorted(root.glob("v*/node*/agent-events.log"))


def test_every_line_of_the_other_versions_real_logs_round_trips_and_recomputes_its_length(versions_captures):
    dialects = {}
    for path in _version_logs(versions_captures):
        lines = path.read_text().splitlines()
        log = read_agent_log(lines, source=path.name)
        assert log.problems == [], path
        for record in log.records:
            assert format_record(record) == lines[record.line_number - 1]
            if isinstance(record, AgentLogRecord):
                assert cluster_event(record.event, record.ts_ns, record.fields, dialect=record.dialect) == record
        dialects[path.parent.parent.name] = (log.dialect.name, log.aeron_version)
    assert set(dialects.values()) == {("1.40-1.43", None), ("1.50", "1.50.4")}
    assert dialects["v1.41.7_a_clean_start"][0] == "1.40-1.43"
