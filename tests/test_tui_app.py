"""Driving `recount tui` with Textual's Pilot over the leader-failover sample: what the panels show.

The sample (samples/README.md): leader 0 killed at 4 s; member 1 elected leader of term 1 at
+15.064 s (event #669) on a quorum at the ballot timeout, both live members having written
candidateTermId 1 to node-state.dat at +14.064 s.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
from pathlib import Path

import pyarrow as pa
import pytest
from textual.widgets import Input

from cli.tui.app import DiffScreen, HelpScreen, Jump, RecountApp, parse_jump
from cli.tui.session import Session
from cli.tui.widgets import EventList, Inspector, Timeline
from formats import replay_file
from formats.cluster_codecs import BooleanType
from formats.sbe import encode

ROOT = Path(__file__).resolve().parents[1]
FAILOVER = ROOT / "samples" / "leader-failover" / "incident.arrow"
ELECTED = 669  # member 1 becomes leader of term 1
SIZE = (200, 50)


@pytest.fixture
def failover_path() -> Path:
    if not FAILOVER.exists():
        pytest.skip(f"sample {FAILOVER} not found (recount simulate writes the samples)")
    return FAILOVER


def pilot_test(test):
    """Run an ``async def`` test (Pilot needs an event loop; no pytest asyncio plugin is required)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def make_app(path: Path, **kwargs) -> RecountApp:
    return RecountApp(Session.open(path, block_size=128), **kwargs)


async def ready(app: RecountApp, pilot) -> None:
    await app.wait_until_indexed()
    await pilot.pause()
    for worker in list(app.workers):  # the landmarks s/S/d/D go to, worked out once indexed
        if worker.group == "landmarks":
            await worker.wait()
    await pilot.pause()


def forget_states(session: Session) -> None:
    """Drop every member state the session holds: the next seek re-executes."""
    session._moments.clear()
    session._pinned.clear()
    session._pinned_records.clear()
    session._stepper = None


async def answer_prompt(app: RecountApp, pilot, key: str, text: str) -> None:
    """Open a prompt with ``key`` and type ``text`` into it, key by key (the app's own keys must not fire)."""
    await pilot.press(key)
    await pilot.pause()
    assert app.screen.query_one(Input).value == ""
    await pilot.press(*[{" ": "space"}.get(ch, ch) for ch in text])
    assert app.screen.query_one(Input).value == text
    await pilot.press("enter")
    await pilot.pause()


async def wait_for_search(app: RecountApp, pilot) -> None:
    for worker in list(app.workers):
        if worker.group == "search":
            await worker.wait()
    await pilot.pause()


def status(app: RecountApp) -> str:
    return str(app.query_one("#status").render())


def cluster_row(app: RecountApp, member: int) -> list[str]:
    for line in app.query_one(Inspector).text("cluster").splitlines():
        words = line.replace("▶", " ").split()
        if words and words[0] == str(member):
            return words
    raise AssertionError(f"no row for member {member}")


@pilot_test
async def test_first_screen_shows_the_first_event_every_member_and_the_lanes(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        assert "#0 (1 of 753)" in status(app) and "divergences 0" in status(app)
        assert "+0.000s" in status(app)
        assert cluster_row(app, 0)[1:3] == ["CANVASS", "FOLLOWER"]
        assert cluster_row(app, 1)[1:] == ["-"] * 6  # not started yet
        event_list = app.query_one(EventList)
        assert event_list.visible_positions()[0] == 0
        assert "0 MemberStart members=3" in event_list.line_text(0)
        timeline = str(app.query_one(Timeline).render())
        assert "T0:0" in timeline and "T1:1" in timeline
        assert "×" in timeline  # the killed leader's lane


@pilot_test
async def test_stepping_moves_the_cursor_and_the_inspector_follows(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        shown = [int(k) for k in app.query_one(EventList).layout_lines.positions]  # heartbeats hidden
        await pilot.press("j", "j", "j", "down")
        assert app.cursor == shown[4]
        await pilot.press("k")
        assert app.cursor == shown[3]
        seq = int(app.session.source.seq[shown[3]])
        assert f"event #{seq}" in app.query_one(Inspector).text("event")
        assert f"#{seq} (" in status(app)  # one numbering: the event's seq, in the list, inspector and status
        assert app.session.source.describe(shown[3]) in app.query_one(Inspector).text("event")
        await pilot.press("end")
        assert app.cursor == len(app.session) - 1
        await pilot.press("home")
        assert app.cursor == 0


@pilot_test
async def test_go_to_term_shows_the_new_leader_and_each_members_node_state(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "g", "term 1")
        assert app.cursor == ELECTED
        assert app.member == 1  # the elected member is selected
        # member, state, role, term, leader, node-state.dat candidateTermId, logPosition
        assert cluster_row(app, 1)[1:] == ["LEADER_READY", "LEADER", "1", "1", "1", "5344"]
        assert cluster_row(app, 0)[1:3] == ["DOWN", "LEADER"]
        assert cluster_row(app, 2)[5] == "1"
        files = app.query_one(Inspector).text("files")
        assert "node-state.dat  candidateTermId=1  logPosition=5344" in files
        assert "+15.064s" in status(app)
        highlighted = app.query_one(Inspector).highlighted
        assert "cluster:1.role" in highlighted and "election:electionState" in highlighted
        assert "recordingLog:1.leadershipTermId" in highlighted  # term 1 appended to recording.log


@pilot_test
async def test_changes_since_the_previous_step_are_highlighted(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("1")
        # Member 1 nominates itself: RequestVote out, node-state.dat written (candidateTermId 1).
        source = app.session.source
        nominates = next(
            int(k)
            for k in source.positions_where("type", "RequestVote")
            if source.node[k] == 1 and source.dir_name(k) == "out"
        )
        app.go_to(nominates)
        await pilot.pause()
        inspector = app.query_one(Inspector)
        assert "candidateTermId=1" in inspector.text("files")
        assert "nodeState:candidateTermId" in inspector.highlighted
        assert "election:candidateTermId" in inspector.highlighted
        await pilot.press("j")
        assert "nodeState:candidateTermId" not in app.query_one(Inspector).highlighted


@pilot_test
async def test_state_change_member_and_bookmark_keys(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        changes = app.session.state_changes()
        await pilot.press("s")
        assert app.cursor == changes[1]
        await pilot.press("S")
        assert app.cursor == changes[0]
        await pilot.press("2", "right_square_bracket")
        assert app.member == 2 and app.session.source.event(app.cursor).node == 2
        first_of_2 = app.cursor
        await pilot.press("m")
        await pilot.press("tab")
        assert app.member == 0
        await pilot.press("end", "m", "home", "apostrophe")
        assert app.cursor == first_of_2
        await pilot.press("apostrophe")
        assert app.cursor == len(app.session) - 1
        assert "bookmarks 2" in status(app)


@pilot_test
async def test_breakpoint_continue_and_reverse_continue(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "b", "node 1 role == LEADER")
        assert "breakpoint added" in status(app)
        await pilot.press("c")
        await wait_for_search(app, pilot)
        assert app.cursor == ELECTED
        assert "hit: node 1 role == LEADER" in status(app)
        assert cluster_row(app, 1)[2] == "LEADER"
        await pilot.press("c")
        await wait_for_search(app, pilot)
        assert app.cursor == ELECTED and "no breakpoint hit after the cursor" in status(app)
        await pilot.press("end", "C")
        await wait_for_search(app, pilot)
        assert app.cursor == ELECTED  # reverse-continue: back to where it became true
        await pilot.press("C")
        await wait_for_search(app, pilot)
        assert "no breakpoint hit before the cursor" in status(app)


@pilot_test
async def test_reverse_continue_selects_the_member_the_condition_names(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        app.add_breakpoint("state == FOLLOWER_BALLOT")
        await pilot.press("end", "C")
        await wait_for_search(app, pilot)
        # The last FOLLOWER_BALLOT: member 2 voting for member 1 in term 1.
        assert app.member == 2
        assert cluster_row(app, 2)[1] == "FOLLOWER_BALLOT"
        assert app.session.source.relative(int(app.session.source.ts[app.cursor])).startswith("+14.064s")


@pilot_test
async def test_a_bad_breakpoint_is_refused_in_the_status_line(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "b", "node 1 colour == jk")
        assert "breakpoint: column 8: unknown field 'colour'" in status(app)
        assert app.conditions == []
        await pilot.press("c")
        assert "no breakpoint" in status(app)


@pilot_test
async def test_filter_shows_only_matching_events_and_steps_through_them(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "f", "node=2 type=Vote,RequestVote")
        assert app.cursor == app.query_one(EventList).visible_positions()[0]
        event_list = app.query_one(EventList)
        shown = event_list.visible_positions()
        assert shown and all(app.session.source.event(k).node == 2 for k in shown)
        assert {app.session.source.event(k).type for k in shown} == {"Vote", "RequestVote"}
        assert app.cursor == shown[0]
        await pilot.press("j")
        assert app.cursor == shown[1]
        assert "filter node=2 type=RequestVote,Vote" in status(app)
        await pilot.press("f")
        await pilot.pause()
        app.screen.query_one(Input).value = ""
        await pilot.press("enter")
        await pilot.pause()
        hidden = event_list.hidden_heartbeats
        assert hidden and len(event_list.layout_lines.positions) == len(app.session) - hidden


@pilot_test
async def test_records_can_be_hidden_from_the_list(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        event_list = app.query_one(EventList)
        shown = len(event_list.layout_lines.positions)
        assert event_list.layout_lines.height > shown
        assert "↳" in event_list.line_text(1) and "election 'node started'" in event_list.line_text(1)
        await pilot.press("r")
        assert event_list.layout_lines.height == shown


@pilot_test
async def test_the_event_is_decoded_field_by_field_with_its_raw_bytes(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        app.go_to(ELECTED)
        await pilot.pause()
        text = app.query_one(Inspector).text("event")
        assert "NewLeadershipTerm" in text
        assert "leadershipTermId" in text and "termBaseLogPosition" in text
        payload = app.session.source.event(ELECTED).payload
        assert f"raw bytes ({len(payload)}, as recorded)" in text
        assert "0000  " + " ".join(f"{b:02x}" for b in payload[:16]) in text


@pilot_test
async def test_command_palette_offers_each_elected_leader(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"member", "space", "1", "space", *"elected")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert app.cursor == ELECTED and app.member == 1


@pilot_test
async def test_command_palette_jumps_to_a_typed_term(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"term", "space", "1")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await pilot.pause()
        assert app.cursor == ELECTED


@pilot_test
async def test_help_lists_the_key_bindings(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        keys = [key for key, _ in app.KEYS]
        assert "c / C" in keys and "ctrl+s" in keys
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


@pilot_test
async def test_screenshot_is_saved_and_never_overwrites(failover_path, tmp_path):
    app = make_app(failover_path, screenshot_dir=str(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("ctrl+s")
        await pilot.press("ctrl+s")
        await pilot.pause()
    saved = sorted(p.name for p in tmp_path.iterdir())
    assert saved == ["recount-incident-event0-1.svg", "recount-incident-event0.svg"]
    assert "MemberStart" in (tmp_path / "recount-incident-event0.svg").read_text()


@pilot_test
async def test_diff_view_walks_the_differences_between_two_replays(failover_path, tmp_path):
    events, metadata = replay_file.read_events(pa.memory_map(str(failover_path)))
    lost = next(
        i
        for i, e in enumerate(events)
        if (e.node, e.dir, e.type, e.peer) == (1, "in", "Vote", 2) and e.fields["candidateTermId"] == 1
    )
    other_path = tmp_path / "lost-vote.arrow"
    table = replay_file.events_to_table(
        events[:lost] + events[lost + 1 :], source="lost-vote", cluster_members=metadata.cluster_members
    )
    with pa.OSFile(str(other_path), "wb") as sink:
        replay_file.write_table(table, sink)
    app = make_app(failover_path, other=Session.open(other_path), other_name="lost-vote.arrow")
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("v")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, DiffScreen)
        first = screen.starts[0]
        assert screen.view.row == first
        row = screen.rows[first]
        assert row.differs and row.left.node == 1 and "LEADER" in row.left.text
        assert screen.view.row_text(first).startswith("≠")
        assert not any(r.differs for r in screen.rows[:first])
        assert f"differences: {len(screen.starts)}" in str(screen.query_one("#diff-status").render())
        if len(screen.starts) > 1:
            await pilot.press("n")
            assert screen.view.row == screen.starts[1]
            await pilot.press("N")
        assert screen.view.row == first
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, DiffScreen)
        assert app.cursor == row.left.position


@pilot_test
async def test_a_divergence_is_marked_on_the_timeline_and_in_the_list(failover_path, tmp_path):
    events, metadata = replay_file.read_events(pa.memory_map(str(failover_path)))
    flipped = next(
        i
        for i, e in enumerate(events)
        if (e.node, e.dir, e.type, e.peer) == (2, "out", "Vote", 1) and e.fields["candidateTermId"] == 1
    )
    message = dataclasses.replace(events[flipped].message(), vote=BooleanType.FALSE)
    events[flipped] = dataclasses.replace(
        events[flipped], fields=message.to_fields(), payload=encode(message)
    )
    path = tmp_path / "flipped.arrow"
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(replay_file.events_to_table(events, source="flipped"), sink)
    app = make_app(path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        # Two: the model's YES has no recorded counterpart, and the recorded NO has no model counterpart.
        assert app.session.index.summary["divergences"] == 2 and "divergences 2" in status(app)
        problems_row = str(app.query_one(Timeline).render()).splitlines()[-2]
        assert problems_row.startswith("problems") and "!" in problems_row
        await pilot.press("d")
        assert app.cursor == flipped
        line = app.query_one(EventList).layout_lines.line_of(flipped)
        assert app.query_one(EventList).line_text(line).startswith("  !")
        # the list draws the divergence records (their ``cause`` is an attribution, not a change's cause:
        # drawing one once crashed the list)
        event_list = app.query_one(EventList)
        drawn = [event_list.line_text(y) for y in range(event_list.layout_lines.height)]
        assert sum("DIVERGENCE [model]" in text for text in drawn) == 2  # the two the summary counts
        await pilot.pause()
        # The inspector says what the replay found about this event.
        assert (
            "2 DIVERGENCE [model] expected 2→1 Vote candidateTermId=1 log=(0,5344) ✗ actual 2→1 Vote candidateTermId=1"
            " log=(0,5344) ✓"
            in (app.query_one(Inspector).text("event").replace("\n", " "))
        )


@pilot_test
async def test_diff_without_a_second_replay_says_how_to_get_one(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("v")
        assert "start with --diff OTHER" in status(app)


def test_jumps_parse_from_words():
    assert parse_jump("time 12s") == Jump("time", 12_000_000_000)
    assert parse_jump("t 1500ms") == Jump("time", 1_500_000_000)
    assert parse_jump("seq 5") == Jump("seq", 5)
    assert parse_jump("next Vote") == Jump("next", "Vote")
    assert parse_jump("pos 4096") == Jump("log", 4096)
    for bad, message in [
        ("term two", "term takes an integer"),
        ("jump 3", "unknown jump 'jump'"),
        ("time", "expected one of"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_jump(bad)


def test_a_member_event_before_its_start_is_shown_not_raised(failover_path, tmp_path):
    events, metadata = replay_file.read_events(pa.memory_map(str(failover_path)))
    events = [dataclasses.replace(e) for e in events if not (e.type == "MemberStart" and e.node == 2)]
    path = tmp_path / "no-start.arrow"
    with pa.OSFile(str(path), "wb") as sink:
        replay_file.write_table(replay_file.events_to_table(events, source="x"), sink)

    async def run() -> str:
        app = make_app(path)
        async with app.run_test(size=SIZE) as pilot:
            await ready(app, pilot)
            app.go_to(100)
            await pilot.pause()
            return status(app) + app.query_one(Inspector).text("cluster")

    shown = asyncio.run(run())
    assert "replay stopped at event" in shown and "before its MemberStart" in shown


# -- readable at a glance (issue 15) ------------------------------------------------------------------


@pilot_test
async def test_the_cursor_row_is_marked_and_highlighted_unlike_its_neighbours(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("j", "j")
        event_list = app.query_one(EventList)
        line = event_list.layout_lines.line_of(app.cursor)
        y = line - int(event_list.scroll_offset.y)
        cursor_strip = event_list.render_line(y)
        assert cursor_strip.text.startswith("▶")  # visible without colour
        neighbour = event_list.render_line(y + 1 if y == 0 else y - 1)
        assert "▶" not in neighbour.text
        cursor_style = event_list.get_component_rich_style("event-list--cursor")
        assert cursor_style.bgcolor is not None
        assert all(segment.style and segment.style.bgcolor == cursor_style.bgcolor for segment in cursor_strip)
        assert not any(segment.style and segment.style.bgcolor == cursor_style.bgcolor for segment in neighbour)


@pilot_test
async def test_heartbeats_are_hidden_by_default_and_h_shows_them(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        event_list = app.query_one(EventList)
        source = app.session.source
        shown = [int(k) for k in event_list.layout_lines.positions]
        hidden = event_list.hidden_heartbeats
        assert hidden > len(app.session) // 2  # most of a steady-state capture is heartbeats
        assert f"{hidden} heartbeats hidden (h)" in status(app)
        heartbeat = source.heartbeat_mask()
        index = app.session.index
        kept = [k for k in shown if heartbeat[k]]
        # a heartbeat is shown only where the replay found something notable under it
        assert all(k in index.notable or k in index.problem_positions for k in kept)
        assert ELECTED in shown  # the election is all there
        await pilot.press("h")
        assert len(event_list.layout_lines.positions) == len(app.session)
        assert "heartbeats hidden" not in status(app)
        await pilot.press("h")
        assert [int(k) for k in event_list.layout_lines.positions] == shown


@pilot_test
async def test_sent_and_received_copies_of_a_message_are_told_apart(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("h")  # every copy
        event_list = app.query_one(EventList)
        source = app.session.source
        lines = {}
        for y in range(event_list.layout_lines.height):
            i, slot = event_list.layout_lines.line(y)
            if slot == 0:
                lines[int(event_list.layout_lines.positions[i])] = event_list.line_text(y)
        votes = [k for k in lines if source.type_name(k) == "Vote"]
        assert {source.dir_name(k) for k in votes} == {"in", "out"}
        for k in votes:
            word = "sent" if source.dir_name(k) == "out" else "recv"
            assert f" {word} " in lines[k], lines[k]


@pilot_test
async def test_w_switches_every_time_shown_between_relative_seconds_and_utc(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "g", "term 1")
        assert "+15.064s" in status(app)
        await pilot.press("w")
        source = app.session.source
        from cli.times import wall_time

        utc = wall_time(int(source.ts[app.cursor]))
        assert utc.endswith("Z") and utc in status(app)
        event_list = app.query_one(EventList)
        assert utc in event_list.line_text(event_list.layout_lines.line_of(app.cursor))
        await pilot.press("w")
        assert "+15.064s" in status(app)


@pilot_test
async def test_at_100_by_30_the_cluster_at_the_cursor_is_readable(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "g", "term 1")
        cluster = app.query_one(Inspector).text("cluster")
        assert "…" not in cluster
        lines = [line.split() for line in cluster.splitlines()]
        assert ["▶1", "LEADER_READY", "LEADER"] in lines
        assert any(words[:2] == ["term=1", "leader=1"] and "log=5344" in words for words in lines)
        assert ["0", "DOWN", "LEADER"] in lines  # the killed leader, as it left it
        assert "#669 (670 of 753)" in status(app)


@pilot_test
async def test_keys_typed_before_the_prompt_opens_go_into_it_not_to_the_main_view(failover_path):
    from textual import events

    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        member, axis = app.member, app.query_one(Timeline).by_events
        for character in "gterm 1":  # one read from the terminal: all queued before the prompt exists
            app.post_message(events.Key("space" if character == " " else character, character))
        await pilot.pause()
        await pilot.pause()
        assert app.screen.query_one(Input).value == "term 1"
        assert (app.member, app.query_one(Timeline).by_events) == (member, axis)  # "t", "1" ran nothing
        await pilot.press("enter")
        await pilot.pause()
        assert app.cursor == ELECTED


@pilot_test
async def test_the_inspector_says_why_the_election_started_and_who_led_each_term(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "g", "term 1")
        inspector = app.query_one(Inspector)
        election = inspector.text("election")
        started = app.session.election_of(1, app.cursor)
        assert started is not None and started.node == 1 and started.position < ELECTED
        assert f"started {app.session.source.relative(started.ts)} at #{int(app.session.source.seq[started.position])}" in election
        assert "leader heartbeat timeout" in election  # Aeron's own reason, from the NEW_ELECTION record
        rows = [line.split() for line in inspector.text("leaders").splitlines()[2:] if line.strip()]
        assert [row[:3] for row in rows] == [["0", "0", "+0.197s"], ["1", "1", "+15.064s"]]
        assert rows[1][3] == "1.254s"  # from member 1's election start at +13.810 s to its leadership
        await pilot.press("home")
        assert "no leader yet" in inspector.text("leaders")


@pilot_test
async def test_a_watchpoint_stops_wherever_the_value_changes_forward_and_back(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        session = app.session
        # Where member 1's candidateTermId changes, found the slow way: every event's moment.
        changes = [k for k in range(len(session))
                   if 1 in session.moment(k).states
                   and session.moment(k).states[1].get("candidateTermId")
                   != (session.moment(k).previous.get(1) or {}).get("candidateTermId")]
        assert len(changes) >= 2
        assert app.add_breakpoint("watch node 1 candidateTermId")
        for expected in changes:
            await pilot.press("c")
            await wait_for_search(app, pilot)
            assert app.cursor == expected and app.member == 1
            assert "hit: watch node 1 candidateTermId" in status(app)
        await pilot.press("C")
        await wait_for_search(app, pilot)
        assert app.cursor == changes[-2]


@pilot_test
async def test_a_breakpoint_naming_a_member_or_state_that_cannot_be_is_refused_with_a_message(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        assert not app.add_breakpoint("node 5 role == LEADER")
        assert "breakpoint: no member 5 in this replay (members: 0, 1, 2)" in status(app)
        assert not app.add_breakpoint("state == FOLLOWR_CATCHUP")
        assert "is not a value of electionState" in status(app)
        assert app.conditions == []
        assert app.add_breakpoint("node 2 state == FOLLOWER_CATCHUP")


@pilot_test
async def test_l_jumps_to_where_a_value_last_changed_and_says_what_changed_it(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await answer_prompt(app, pilot, "g", "term 1")  # member 1 selected, leader of term 1
        session = app.session
        expected = max(k for k in range(ELECTED + 1)
                       if 1 in session.moment(k).states
                       and session.moment(k).states[1]["candidateTermId"]
                       != (session.moment(k).previous.get(1) or {}).get("candidateTermId"))
        await answer_prompt(app, pilot, "l", "candidateTermId")
        await wait_for_search(app, pilot)
        assert app.cursor == expected < ELECTED
        seq = int(session.source.seq[expected])
        # member 1 nominated itself when its nomination deadline fired: the event there is its own RequestVote
        assert session.source.dir_name(expected) == "out" and session.source.event(expected).node == 1
        # ... and the cause comes from the model (the node-state.dat write's record), not from the event there
        assert f"member 1  ·  candidateTermId 0 → 1 at #{seq}, on its nomination deadline" in status(app)
        why = app.query_one(Inspector).text("why")
        assert "candidateTermId: 0 → 1 here, on its nomination deadline" in why
        assert "1 node-state candidateTermId=1" in why and "1 NOMINATE → CANDIDATE_BALLOT  on its nomination deadline" in why
        await answer_prompt(app, pilot, "l", "leadershipTermId")
        await wait_for_search(app, pilot)
        cause = session.source.event(app.cursor)
        assert (cause.node, cause.dir, cause.type) == (1, "in", "NewLeadershipTerm")  # it followed leader 0
        assert "member 1  ·  leadershipTermId -1 → 0" in status(app)
        assert "on NewLeadershipTerm from 0: the event here" in status(app)
        await answer_prompt(app, pilot, "l", "candidateTerm")
        assert "last change: " in status(app) and "unknown field 'candidateTerm'" in status(app)


@pilot_test
async def test_a_whole_answer_typed_ahead_enter_included_is_taken(failover_path):
    from textual import events

    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        for character in "gterm 1\r":  # as a fast typist's terminal delivers it: one read, Enter last
            key = {" ": "space", "\r": "enter"}.get(character, character)
            app.post_message(events.Key(key, character))
        await pilot.pause()
        await pilot.pause()
        assert app.cursor == ELECTED and app.member == 1
        assert not app.screen.query(Input)  # the prompt is gone


# -- issue 15: causes, links to the last change, seeks in the background, answers while indexing -----------


def link_at(widget, action_words: str) -> tuple[int, int]:
    """Where on ``widget`` (as drawn) the link whose action mentions ``action_words`` is."""
    from textual.geometry import Region

    for y, strip in enumerate(widget.render_lines(Region(0, 0, widget.size.width, widget.size.height))):
        x = 0
        for segment in strip:
            meta = segment.style.meta if segment.style is not None else {}
            if action_words in str(meta.get("@click", "")):
                return x, y
            x += segment.cell_length
    raise AssertionError(f"no link for {action_words} on {widget}")


async def settled(app: RecountApp, pilot) -> None:
    """Wait for the seek the last key started (a worker) to be on screen."""
    for _ in range(500):
        await pilot.pause()
        if not app.seek_pending:
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the seek never settled")


@pilot_test
async def test_each_change_in_the_list_says_what_caused_it(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        event_list = app.query_one(EventList)
        lines = [event_list.line_text(y) for y in range(event_list.layout_lines.height)]
        ballot = [line for line in lines if "2 NOMINATE → FOLLOWER_BALLOT" in line]
        assert ballot and all("on RequestVote from 1" in line for line in ballot[1:])  # term 1: member 1 asked
        timeout = [line for line in lines if "election 'leader heartbeat timeout'" in line]
        assert timeout and all(line.endswith("on its leader heartbeat timeout") for line in timeout)
        assert any("0 election 'node started'" in line and line.endswith("on MemberStart") for line in lines)


@pilot_test
async def test_clicking_a_value_in_the_inspector_jumps_to_where_it_last_changed_and_shows_the_cause(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        app.jump(Jump("term", 1))  # member 1 selected: it has just become leader of term 1
        await settled(app, pilot)
        section = app.query_one("#inspector-election")
        await pilot.click(section, offset=link_at(section, "'candidateTermId', 1"))
        await wait_for_search(app, pilot)
        await settled(app, pilot)
        seq = int(app.session.source.seq[app.cursor])
        assert app.cursor < ELECTED
        assert f"member 1  ·  candidateTermId 0 → 1 at #{seq}, on its nomination deadline" in status(app)
        assert "candidateTermId: 0 → 1 here, on its nomination deadline" in app.query_one(Inspector).text("why")


@pilot_test
async def test_a_value_no_record_speaks_for_is_traced_to_the_message_that_changed_it(failover_path):
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        await pilot.press("end")
        await settled(app, pilot)
        await pilot.press("2")
        await answer_prompt(app, pilot, "l", "commitPosition")
        await wait_for_search(app, pilot)
        event = app.session.source.event(app.cursor)
        # a follower's commit position moves when its leader's CommitPosition reaches it
        assert (event.node, event.dir, event.type, event.peer) == (2, "in", "CommitPosition", 1)
        assert "member 2  ·  commitPosition " in status(app)
        assert "on CommitPosition from 1: the event here" in status(app)


@pilot_test
async def test_a_slow_seek_says_seeking_until_its_answer_is_on_screen(failover_path, monkeypatch):
    import threading

    original = Session.prepare
    gate = threading.Event()  # held until the test has looked: however loaded the machine, the seek is slow

    def slow_prepare(self, position, around=(), should_stop=lambda: False):
        if self.moment_cached(position) is None:
            gate.wait(10)
        return original(self, position, around, should_stop)

    app = RecountApp(Session.open(failover_path, block_size=1000))  # one checkpoint: far seeks re-execute a lot
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        forget_states(app.session)
        monkeypatch.setattr(Session, "prepare", slow_prepare)
        far = len(app.session.source.seq) - 1  # the last event: not yet computed, far from the start
        app.go_to(far)
        await pilot.pause()
        await asyncio.sleep(0.15)
        await pilot.pause()
        assert app.seek_pending and "seeking…" in status(app)
        gate.set()
        await settled(app, pilot)
        assert "seeking…" not in status(app)
        assert f"event #{int(app.session.source.seq[far])}" in app.query_one(Inspector).text("event")


@pilot_test
async def test_a_step_back_that_must_re_execute_says_seeking_in_the_frame_of_the_move(failover_path, monkeypatch):
    """``k`` onto an event whose state is not at hand: the list moves and the status bar says "seeking…"
    in the first frame drawn after the key, not only once 100 ms have passed; once the answer is drawn
    it says so no more, and the move is logged as announced."""
    import threading
    import time

    gate = threading.Event()
    original = Session.prepare

    def held_prepare(self, position, around=(), should_stop=lambda: False):
        gate.wait(5)  # a slow machine: the re-execution has not finished when the frame is drawn
        return original(self, position, around, should_stop)

    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        monkeypatch.setattr(Session, "prepare", held_prepare)
        shown = [int(k) for k in app.query_one(EventList).layout_lines.positions]
        forget_states(app.session)
        start = time.perf_counter()
        app.go_to(shown[-1])  # the end, far from the first checkpoint
        gate.set()
        await settled(app, pilot)
        gate.clear()
        forget_states(app.session)  # the state one event back is not at hand any more
        logged = len(app.seek_log)
        await pilot.press("k")
        await pilot.pause()
        assert app.cursor == shown[-2]
        assert app.seek_pending and "seeking…" in status(app)
        assert time.perf_counter() - start < 5  # the gate, not a timeout, let the first seek through
        gate.set()
        await settled(app, pilot)
        assert "seeking…" not in status(app)
        assert f"event #{int(app.session.source.seq[shown[-2]])}" in app.query_one(Inspector).text("event")
        assert len(app.seek_log) > logged and app.seek_log[-1][1]  # announced while it lasted


@pilot_test
async def test_after_a_jump_the_events_around_it_are_at_hand(failover_path):
    """One re-execution gives the cursor's state and the states of the events the list shows around it,
    equal to each one's own: stepping through them then re-executes nothing and says no "seeking…"."""
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        shown = [int(k) for k in app.query_one(EventList).layout_lines.positions]
        target = shown[len(shown) // 2]
        forget_states(app.session)
        app.go_to(target)
        await settled(app, pilot)
        around = app.query_one(EventList).around(target)
        assert len(around) > 20 and target in around
        assert all(app.session.moment_cached(k) is not None for k in around)
        fresh = Session.open(failover_path, block_size=128)
        fresh.index = app.session.index
        for k in (around[0], target, around[-1]):
            assert app.session.moment_cached(k) == fresh.moment(k)  # the same as re-executed alone
        for _ in range(10):
            before = app.cursor
            await pilot.press("k")
            await pilot.pause()
            assert app.cursor < before and not app.seek_pending and "seeking…" not in status(app)


@pilot_test
async def test_once_indexed_the_places_s_and_d_go_to_are_worked_out_ahead(failover_path):
    """The state changes (and divergences) are landmarks: once indexed, their moments and the records
    around them are worked out in the background, equal to their own re-execution, so s/S answer at once."""
    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        changes = app.session.index.changes
        assert changes and all(app.session.moment_cached(k) is not None for k in changes)
        fresh = Session.open(failover_path, block_size=128)
        fresh.index = app.session.index
        for k in changes[:: max(len(changes) // 5, 1)]:
            assert app.session.moment_cached(k) == fresh.moment(k)
            assert app.session.records_cached(k) == fresh.records_at(k)
        app.session._moments.clear()  # only the landmarks are left
        app.session._stepper = None
        for _ in range(len(changes) - 1):
            before = app.cursor
            await pilot.press("s")
            await pilot.pause()
            assert app.cursor > before and app.cursor in changes
            assert not app.seek_pending and "seeking…" not in status(app)


@pilot_test
async def test_an_event_with_thousands_of_problems_lists_a_few_in_the_inspector_and_counts_the_rest(failover_path, monkeypatch):
    """A capture can pin thousands of divergences on one event (the 1M-event benchmark has 4,800 on one):
    the inspector lists the first few and says how many more, instead of taking seconds to draw them."""
    from cli.tui.session import Problem
    from cli.tui.widgets.inspector import PROBLEMS_SHOWN

    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        record = {"kind": "divergence", "ts": int(app.session.source.ts[ELECTED]), "node": 1, "cause": "model",
                  "why": "a test", "expected": None, "actual": None}
        many = [Problem(ELECTED, record["ts"], 1, dict(record, why=f"number {i}")) for i in range(4800)]
        monkeypatch.setattr(Session, "problems_at", lambda self, position: many if position == ELECTED else [])
        app.go_to(ELECTED)
        await settled(app, pilot)
        text = app.query_one(Inspector).text("event")
        assert text.count("DIVERGENCE") == PROBLEMS_SHOWN
        assert f"… and {4800 - PROBLEMS_SHOWN} more about this event" in text


@pilot_test
async def test_while_indexing_every_answer_says_what_is_still_pending(failover_path):
    import threading

    session = Session.open(failover_path, block_size=64)
    gate = threading.Event()
    build = session.build_index

    def held_index(should_stop, should_pause):  # the index stops at event 320 until the gate opens
        return build(should_stop=should_stop,
                     should_pause=lambda: should_pause() or (session.index.done >= 320 and not gate.is_set()))

    session.build_index = held_index
    app = RecountApp(session)
    async with app.run_test(size=SIZE) as pilot:
        for _ in range(200):
            await pilot.pause()
            if session.index.done >= 320:
                break
            await asyncio.sleep(0.02)
        assert session.index.done == 320 and not session.index.finished
        share = f"{320 * 100 // len(session)}%"
        app.go_to(300)
        await settled(app, pilot)
        await pilot.press("d")  # the sample has no divergence: none in the part indexed, the rest pending
        assert f"no divergence or invariant violation after here; indexed up to #319 ({share}), the rest is pending" in status(app)
        await pilot.press("s")
        assert f"no state change after here; indexed up to #319 ({share}), the rest is pending" in status(app)
        app.go_to(ELECTED)
        await pilot.pause()
        assert "is shown once the index reaches it" in app.query_one(Inspector).text("cluster")
        gate.set()
        await app.wait_until_indexed()
        await settled(app, pilot)
        assert "LEADER" in app.query_one(Inspector).text("cluster")
        await pilot.press("d")
        assert "no divergence or invariant violation after here" in status(app) and "pending" not in status(app)


@pilot_test
@pytest.mark.parametrize("covered", [True, False], ids=["as built", "the check off (the test's own control)"])
async def test_a_seek_brings_the_events_and_records_of_the_rows_around_it_without_loading_them_beside_it(
    failover_path, covered
):
    """While a seek re-executes the events around the cursor, the list does not load their records in
    another worker (the same work twice, competing for the interpreter); once the seek is done every
    row on screen is drawn with its records.  With the check switched off, blocks inside the seek's span
    are loaded beside it: what shows the test can tell."""
    import threading

    app = make_app(failover_path)
    async with app.run_test(size=SIZE) as pilot:
        await ready(app, pilot)
        event_list = app.query_one(EventList)
        event_list.show_records = True
        await pilot.pause()
        shown = [int(k) for k in event_list.layout_lines.positions]
        target = shown[len(shown) // 2]
        forget_states(app.session)
        app.session._record_blocks.clear()
        app.session._stepped.clear()
        if not covered:
            app._seek_covers = lambda position: False
        loaded: list[int] = []
        load = app.session.load_records
        app.session.load_records = lambda b: (loaded.append(b), load(b))[-1]
        gate = threading.Event()
        prepare = app.session.prepare

        def held_prepare(*args, **kwargs):
            gate.wait(5)  # a slow machine: the list is drawn while the seek still runs
            return prepare(*args, **kwargs)

        app.session.prepare = held_prepare
        app.go_to(target)
        span = app._seek_span
        assert span is not None and span[0] <= target <= span[1]
        for _ in range(5):
            await pilot.pause()
        gate.set()
        await settled(app, pilot)
        await pilot.pause()
        size = app.session.source.block_size
        inside = [b for b in loaded if b * size >= span[0] and (b + 1) * size - 1 <= span[1]]
        if covered:
            assert not inside
            top = int(event_list.scroll_offset.y)
            drawn = [event_list._text(y, wait=False).plain for y in range(top, top + event_list.size.height)]
            assert drawn and not any("…" in line for line in drawn)
        else:
            assert inside, (span, loaded, size)
