"""An `Incident` as one self-contained HTML page: inline CSS and SVG, no script, nothing fetched.

`render_html(incident)` returns the page as a string (pure: no I/O, no clock, the same incident
gives the same bytes).  The page, top to bottom: what was replayed and the verdict; the members'
swimlanes (election state above, role below, down periods hatched, elections shaded, the moment
each term got its leader marked, divergences as red triangles); the leader of each term; each
election as a zoomed swimlane and a sequence diagram of its canvass, votes and NewLeadershipTerm;
the divergences and invariant violations; each member's node-state.dat and recording.log at its
first start and at the end.  Tooltips are SVG ``<title>`` elements, so hovering works without script.

Elements carry ``data-*`` attributes (``data-member``, ``data-term``, ``data-election``, ...) so a
test, or a reader's own script, can find what is drawn without parsing the SVG geometry.
"""

from __future__ import annotations

import datetime
import html
from collections.abc import Mapping, Sequence
from typing import Any

from formats.describe import describe_fields, describe_record
from recorder.report.model import Down, Election, Incident, Message, StateChange, message_identity

#: Election state → fill colour, by what the state is about.
STATE_COLOURS = {
    "INIT": "#cbd5e1",
    "CANVASS": "#94a3b8",
    "NOMINATE": "#facc15",
    "CANDIDATE_BALLOT": "#fb923c",
    "FOLLOWER_BALLOT": "#c084fc",
    "CLOSED": "#eef2f6",
}
LEADER_STATE = "#22c55e"
FOLLOWER_STATE = "#60a5fa"
ROLE_COLOURS = {"LEADER": "#15803d", "CANDIDATE": "#ea580c", "FOLLOWER": "#64748b"}
MESSAGE_COLOURS = {
    "CanvassPosition": "#64748b",
    "RequestVote": "#ea580c",
    "Vote": "#16a34a",
    "NewLeadershipTerm": "#2563eb",
    "CatchupPosition": "#7c3aed",
    "StopCatchup": "#7c3aed",
}
NEGATIVE_VOTE = "#dc2626"
#: Rows of one election's sequence diagram; the rest is counted and left to the Perfetto trace.
MAX_SEQUENCE_ROWS = 120
#: Divergences drawn as rows of one sequence diagram, and listed in the table; the rest are counted.
MAX_PROBLEM_ROWS = 12
MAX_PROBLEM_TABLE = 300
CHAR_PX = 6.6  # width of one character of the 11 px monospace font, for fitting labels


def state_colour(state: str) -> str:
    if state in STATE_COLOURS:
        return STATE_COLOURS[state]
    if state.startswith("LEADER_"):
        return LEADER_STATE
    if state.startswith("FOLLOWER_"):
        return FOLLOWER_STATE
    return "#e2e8f0"


def _e(value: Any) -> str:
    if isinstance(value, bool):
        value = "true" if value else "false"
    return html.escape(str(value), quote=True)


class _Clock:
    """Times as seconds from the start of the recording (captures carry epoch nanoseconds)."""

    def __init__(self, origin: int) -> None:
        self.origin = origin

    def seconds(self, ts: int | None, digits: int = 3) -> str:
        if ts is None:
            return "–"
        return f"{(ts - self.origin) / 1e9:.{digits}f} s"

    def wall(self, ts: int) -> str:
        """UTC wall-clock time when ``ts`` looks like an epoch time (after 2001), else ''."""
        if ts < 1_000_000_000 * 1_000_000_000:
            return ""
        moment = datetime.datetime.fromtimestamp(ts / 1e9, tz=datetime.UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def _duration(ns: int) -> str:
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} µs"


def _nice_step(span_ns: int, target: int = 8) -> int:
    raw = max(span_ns / target, 1)
    power = 1
    while power * 10 <= raw:
        power *= 10
    for factor in (1, 2, 5, 10):
        if power * factor >= raw:
            return power * factor
    return power * 10


# -- the swimlanes ----------------------------------------------------------------------------------


def lanes_svg(incident: Incident, t0: int, t1: int, *, width: int = 1120, detail: bool = True,
              label: str = "cluster") -> str:
    """Every member's election state and role between ``t0`` and ``t1``, one lane each."""
    clock = _Clock(incident.start_ns)
    left, right = 96, 16
    plot = width - left - right
    span = max(t1 - t0, 1)

    def x(ts: int) -> float:
        return left + (min(max(ts, t0), t1) - t0) / span * plot

    top = 44
    state_h, role_h, gap = 24, 9, 18
    block = state_h + 3 + role_h + gap
    height = top + block * len(incident.lanes) + 22
    out: list[str] = [
        f'<svg class="lanes" data-lanes="{_e(label)}" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{_e("Election state and role of each member over time")}">',
        '<defs><pattern id="down-hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="6" height="6" fill="#fee2e2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#ef4444" stroke-width="2"/>'
        "</pattern></defs>",
    ]
    # Elections, shaded behind everything, each a link to its sequence diagram.
    for election in incident.elections:
        if election.end_ns < t0 or election.start_ns > t1:
            continue
        x1, x2 = x(election.start_ns), x(election.end_ns)
        if detail:
            out.append(f'<a href="#election-{election.number}">')
        out.append(
            f'<rect class="election-band" data-election="{election.number}" x="{x1:.1f}" y="{top - 6}" '
            f'width="{max(x2 - x1, 2):.1f}" height="{height - top - 16}" fill="#fef9c3" opacity="0.7">'
            f"<title>Election {election.number}: {_e(clock.seconds(election.start_ns))} → {_e(clock.seconds(election.end_ns))}"
            f"</title></rect>"
        )
        if detail:
            out.append(f'<text x="{x1 + 2:.1f}" y="{height - 8}" class="small" fill="#854d0e">E{election.number}</text></a>')
    # Time axis.
    step = _nice_step(span)
    first = t0 + (-(t0 - incident.start_ns) % step)
    tick = first
    while tick <= t1:
        tx = x(tick)
        out.append(f'<line x1="{tx:.1f}" y1="{top - 8}" x2="{tx:.1f}" y2="{height - 20}" stroke="#e5e7eb"/>')
        out.append(f'<text x="{tx:.1f}" y="{top - 12}" class="axis" text-anchor="middle">{_e(_tick_label(tick - incident.start_ns, step))}</text>')
        tick += step
    # The lanes.
    for row, lane in enumerate(incident.lanes):
        y = top + row * block
        out.append(f'<g class="lane" data-member="{lane.member}">')
        out.append(f'<text x="{left - 10}" y="{y + state_h / 2 + 4}" class="lane-label" text-anchor="end">member {lane.member}</text>')
        out.append(f'<text x="{left - 10}" y="{y + state_h + role_h + 2}" class="small" text-anchor="end" fill="#64748b">role</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{plot}" height="{state_h}" fill="#ffffff" stroke="#e2e8f0"/>')
        for item in lane.states:
            out.append(_span_rect(item.value, item.start_ns, item.end_ns, item.via, x, y, state_h, state_colour(item.value),
                                  clock, "state", dark=item.value not in ("CLOSED", "INIT"), note=item.note))
        for item in lane.roles:
            out.append(_span_rect(item.value, item.start_ns, item.end_ns, (), x, y + state_h + 3, role_h,
                                  ROLE_COLOURS.get(item.value, "#94a3b8"), clock, "role", show_text=False))
        for down in lane.down:
            out.append(_down_rect(down, x, y, state_h + 3 + role_h, clock, t0, t1))
        marked: set[tuple[str, int]] = set()  # one mark per pixel is all the eye can tell apart
        for problem in incident.problems:
            if problem.member == lane.member and isinstance(problem.ts, int) and t0 <= problem.ts <= t1:
                px = x(problem.ts)
                if (problem.kind, round(px)) in marked:
                    continue
                marked.add((problem.kind, round(px)))
                colour = "#dc2626" if problem.kind == "divergence" else "#7f1d1d"
                out.append(
                    f'<path class="problem-mark" data-kind="{problem.kind}" d="M{px:.1f},{y - 1} l-5,-8 h10 z" fill="{colour}">'
                    f"<title>{_e(problem.kind)} at {_e(clock.seconds(problem.ts))}: {_e(describe_record(problem.record))}</title></path>"
                )
        out.append("</g>")
    # Leaders: a line where each term got its leader, labelled above the lanes.
    for index, term in enumerate(incident.terms):
        if not t0 <= term.elected_ns <= t1:
            continue
        tx = x(term.elected_ns)
        ty = 12 + (index % 2) * 11
        text = f"term {term.leadership_term_id}: leader {term.leader}"
        flip = tx + 3 + len(text) * CHAR_PX > width - 4
        label_x, anchor = (tx - 3, ' text-anchor="end"') if flip else (tx + 3, "")
        out.append(
            f'<g class="term-mark" data-term="{term.leadership_term_id}" data-leader="{term.leader}">'
            f'<line x1="{tx:.1f}" y1="{ty + 2}" x2="{tx:.1f}" y2="{height - 20}" stroke="#15803d" stroke-dasharray="3,3"/>'
            f'<text x="{label_x:.1f}" y="{ty}" class="small term-label" fill="#15803d"{anchor}>{_e(text)}</text>'
            f"<title>Term {term.leadership_term_id}: member {term.leader} became leader at {_e(clock.seconds(term.elected_ns, 6))}</title></g>"
        )
    out.append("</svg>")
    return "".join(out)


def _tick_label(offset_ns: int, step: int) -> str:
    if step >= 1_000_000_000:
        return f"{offset_ns / 1e9:.0f} s"
    if step >= 100_000_000:
        return f"{offset_ns / 1e9:.1f} s"
    if step >= 1_000_000:
        return f"{offset_ns / 1e9:.3f} s"
    return f"{offset_ns / 1e9:.6f} s"


def _span_rect(value: str, start: int, end: int, via: Sequence[str], x, y: float, h: float, fill: str,
               clock: _Clock, kind: str, *, dark: bool = True, show_text: bool = True, note: str = "") -> str:
    x1, x2 = x(start), x(end)
    w = x2 - x1
    if w <= 0:
        return ""
    through = f" (through {', '.join(via)})" if via else ""
    tip = f"{value}{through}: {clock.seconds(start, 6)} → {clock.seconds(end, 6)} ({_duration(end - start)})"
    if note:
        tip += f"; {note}"
    parts = [
        f'<rect class="{kind}" data-value="{_e(value)}" x="{x1:.2f}" y="{y}" width="{max(w, 0.8):.2f}" height="{h}" fill="{fill}">'
        f"<title>{_e(tip)}</title></rect>"
    ]
    text = f"{value} · {note}" if note and w > len(value + note) * 6.2 + 14 else value
    if show_text and w > len(text) * 6.2 + 8:
        colour = "#0f172a" if dark else "#64748b"
        parts.append(f'<text x="{x1 + 4:.1f}" y="{y + h / 2 + 4}" class="span-label" fill="{colour}">{_e(text)}</text>')
    return "".join(parts)


def _down_rect(down: Down, x, y: float, h: float, clock: _Clock, t0: int, t1: int) -> str:
    if down.end_ns < t0 or down.start_ns > t1:
        return ""
    x1, x2 = x(down.start_ns), x(down.end_ns)
    what = "crashed" if down.cause == "crash" else "stopped"
    after = f", restarted at {clock.seconds(down.end_ns)}" if down.restarted else ", not restarted"
    label = f"DOWN ({what})"
    parts = [
        f'<g class="down" data-cause="{down.cause}"><rect x="{x1:.2f}" y="{y}" width="{max(x2 - x1, 1):.2f}" height="{h}" '
        f'fill="url(#down-hatch)" stroke="#ef4444"><title>{_e(what)} at {_e(clock.seconds(down.start_ns))}{_e(after)}</title></rect>'
    ]
    if x2 - x1 > len(label) * 6.2 + 10:
        parts.append(f'<text x="{x1 + 5:.1f}" y="{y + 16}" class="span-label down-label" fill="#991b1b">{_e(label)}</text>')
    parts.append("</g>")
    return "".join(parts)


def legend_html() -> str:
    items = [
        ("CANVASS", STATE_COLOURS["CANVASS"]), ("NOMINATE", STATE_COLOURS["NOMINATE"]),
        ("CANDIDATE_BALLOT", STATE_COLOURS["CANDIDATE_BALLOT"]), ("FOLLOWER_BALLOT", STATE_COLOURS["FOLLOWER_BALLOT"]),
        ("LEADER_*", LEADER_STATE), ("FOLLOWER_*", FOLLOWER_STATE), ("CLOSED (no election)", STATE_COLOURS["CLOSED"]),
    ]
    roles = [(f"role {name}", colour) for name, colour in ROLE_COLOURS.items()]
    parts = ['<div class="legend" data-legend="lanes">']
    for name, colour in items + roles:
        parts.append(f'<span><i style="background:{colour}"></i>{_e(name)}</span>')
    parts.append('<span><i class="hatch"></i>member down (crash or stop)</span>')
    parts.append('<span><i style="background:#fef9c3"></i>election</span>')
    parts.append('<span><b class="tri">▼</b>divergence / invariant</span>')
    parts.append('<span><b style="color:#15803d">┆</b>term gets its leader</span>')
    parts.append("</div>")
    return "".join(parts)


# -- the sequence diagrams -----------------------------------------------------------------------------


class _Row:
    __slots__ = ("ts", "kind", "item", "count", "last_ts")

    def __init__(self, ts: int, kind: str, item: Any) -> None:
        self.ts, self.kind, self.item, self.count, self.last_ts = ts, kind, item, 1, ts


def _sequence_rows(election: Election, incident: Incident) -> tuple[list[_Row], int]:
    rows: list[_Row] = []
    seen: dict[tuple, _Row] = {}
    for message in election.messages:
        key = (message.sender, message.receiver, message.type, message_identity(message.fields), message.receive_ns is None)
        if key in seen:  # a repeat (a heartbeat, a re-sent canvass): counted on the first row
            seen[key].count += 1
            seen[key].last_ts = message.ts
            continue
        row = _Row(message.ts, "message", message)
        seen[key] = row
        rows.append(row)
    for change in election.changes:
        rows.append(_Row(change.ts, "state", change))
    for lane in incident.lanes:
        for down in lane.down:
            if election.start_ns <= down.start_ns <= election.end_ns:
                rows.append(_Row(down.start_ns, "down", (lane.member, down)))
    within = [p for p in incident.problems if isinstance(p.ts, int) and election.start_ns <= p.ts <= election.end_ns]
    for problem in within[:MAX_PROBLEM_ROWS]:
        rows.append(_Row(problem.ts, "problem", problem))
    if len(within) > MAX_PROBLEM_ROWS:
        rows.append(_Row(within[MAX_PROBLEM_ROWS].ts, "more-problems", len(within) - MAX_PROBLEM_ROWS))
    order = {"down": 0, "state": 1, "message": 2, "problem": 3, "more-problems": 4}
    rows.sort(key=lambda r: (r.ts, order[r.kind]))
    hidden = max(len(rows) - MAX_SEQUENCE_ROWS, 0)
    return rows[:MAX_SEQUENCE_ROWS], hidden


def sequence_svg(election: Election, incident: Incident) -> str:
    """The election as a sequence diagram: a lifeline per member, a row per message or state change."""
    clock = _Clock(incident.start_ns)
    members = list(incident.members)
    rows, hidden = _sequence_rows(election, incident)
    gutter = 118
    column = max(190, min(320, 960 // max(len(members), 1)))
    width = gutter + column * len(members) + 20
    header = 56
    row_h = 25
    height = header + row_h * len(rows) + 26
    col = {m: gutter + column * i + column / 2 for i, m in enumerate(members)}
    leaders = {t.leader: t.leadership_term_id for t in election.terms}
    out = [
        f'<svg class="sequence" data-election="{election.number}" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="Election {election.number} as a sequence diagram">',
        '<defs>'
        + "".join(
            f'<marker id="arrow-{name}-{election.number}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
            f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
            for name, colour in list(MESSAGE_COLOURS.items()) + [("negative", NEGATIVE_VOTE), ("other", "#334155")]
        )
        + "</defs>",
    ]
    down_spans = {lane.member: lane.down for lane in incident.lanes}

    def y_of(ts: int) -> float:
        for index, row in enumerate(rows):
            if row.ts >= ts:
                return header + row_h * index + 4
        return height - 20

    for member in members:
        cx = col[member]
        out.append(f'<line class="lifeline" x1="{cx:.1f}" y1="{header - 6}" x2="{cx:.1f}" y2="{height - 16}" stroke="#cbd5e1" stroke-width="2"/>')
        for down in down_spans.get(member, ()):
            if down.end_ns < election.start_ns or down.start_ns > election.end_ns:
                continue
            y1 = y_of(down.start_ns) if down.start_ns >= election.start_ns else header - 6
            y2 = y_of(down.end_ns) if down.end_ns <= election.end_ns else height - 16
            out.append(f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}" stroke="#ef4444" stroke-width="3" stroke-dasharray="2,4">'
                       f"<title>member {member} down</title></line>")
        box_w = column - 24
        lead = member in leaders
        fill = "#dcfce7" if lead else "#f1f5f9"
        badge = (f'<text x="{cx:.1f}" y="37" text-anchor="middle" class="small" fill="#15803d">leader of term '
                 f"{_e(leaders[member])}</text>" if lead else "")
        out.append(
            f'<g class="lifeline-head" data-member="{member}"><rect x="{cx - box_w / 2:.1f}" y="6" width="{box_w}" height="36" rx="5" '
            f'fill="{fill}" stroke="#94a3b8"/><text x="{cx:.1f}" y="{22 if lead else 29}" text-anchor="middle" class="head">'
            f"member {member}</text>{badge}</g>"
        )
    for index, row in enumerate(rows):
        y = header + row_h * index + 14
        out.append(f'<text x="8" y="{y + 4}" class="time">+{_e(_duration_short(row.ts - election.start_ns))}</text>')
        if row.kind == "message":
            out.append(_message_row(row, y, col, width, clock, election.number))
        elif row.kind == "state":
            out.append(_state_row(row.item, y, col, width))
        elif row.kind == "down":
            member, down = row.item
            what = "crashed" if down.cause == "crash" else "stopped"
            out.append(f'<text x="{col[member] + 8:.1f}" y="{y + 4}" class="note" fill="#b91c1c">✕ member {member} {what}</text>')
        elif row.kind == "more-problems":
            out.append(f'<text class="note" x="{gutter:.1f}" y="{y + 4}" fill="#dc2626">⚠ … and {row.item} more '
                       f'divergences or invariant violations in this election, from here on (all are in the table below)</text>')
        else:
            problem = row.item
            cx = col.get(problem.member)
            if cx is not None:
                out.append(f'<circle cx="{cx:.1f}" cy="{y}" r="5" fill="#dc2626"/>')
            text = _fit(f"⚠ member {describe_record(problem.record)}", (width - gutter - 8) / CHAR_PX)
            out.append(f'<text class="problem-row note" x="{gutter:.1f}" y="{y + 4}" fill="#dc2626" font-weight="bold">{_e(text)}'
                       f"<title>{_e(describe_record(problem.record))}</title></text>")
    if hidden:
        out.append(f'<text x="8" y="{height - 6}" class="small" fill="#64748b">… {hidden} more rows not drawn '
                   f"(the Perfetto export has every message)</text>")
    out.append("</svg>")
    return "".join(out)


def _duration_short(ns: int) -> str:
    return f"{ns / 1e6:.3f} ms"


def _fit(text: str, chars: float) -> str:
    limit = max(int(chars), 8)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _message_row(row: _Row, y: float, col: Mapping[int, float], width: int, clock: _Clock, number: int) -> str:
    message: Message = row.item
    if message.sender not in col or message.receiver not in col:
        return ""
    x1, x2 = col[message.sender], col[message.receiver]
    negative = message.type == "Vote" and message.fields.get("vote") in (False, "FALSE", 0)
    colour = NEGATIVE_VOTE if negative else MESSAGE_COLOURS.get(message.type, "#334155")
    marker = "negative" if negative else message.type if message.type in MESSAGE_COLOURS else "other"
    direction = 1 if x2 > x1 else -1
    start, end = x1 + 4 * direction, x2 - 4 * direction
    dash = ""
    tail = ""
    if message.receive_ns is None:
        dash = ' stroke-dasharray="5,4"'
        tail = " · no receipt recorded"
    elif message.send_ns is None:
        dash = ' stroke-dasharray="1,3"'
        tail = " · send not recorded"
    repeat = f" ×{row.count}" if row.count > 1 else ""
    label = describe_fields(message.type, message.fields, message.sender, message.receiver) + repeat
    if direction > 0:
        room = (width - 10 - (x1 + 10)) / CHAR_PX
        text = f'<text x="{x1 + 10:.1f}" y="{y - 5}" class="msg" fill="{colour}">{_e(_fit(label, room))}</text>'
    else:
        room = (x1 - 10 - 120) / CHAR_PX
        text = f'<text x="{x1 - 10:.1f}" y="{y - 5}" class="msg" text-anchor="end" fill="{colour}">{_e(_fit(label, room))}</text>'
    timing = f"sent {clock.seconds(message.send_ns, 6)}" if message.send_ns is not None else "send not recorded"
    if message.receive_ns is not None:
        timing += f", received {clock.seconds(message.receive_ns, 6)}"
        if message.send_ns is not None:
            timing += f" ({_duration(message.receive_ns - message.send_ns)} later)"
    else:
        timing += ", no receipt recorded"
    if row.count > 1:
        timing += f"; sent {row.count} times in this election, last at {clock.seconds(row.last_ts, 6)}"
    lost = ""
    if message.receive_ns is None:
        cx, r = end - 7 * direction, 4
        lost = (f'<path d="M{cx - r:.1f},{y - r} L{cx + r:.1f},{y + r} M{cx - r:.1f},{y + r} L{cx + r:.1f},{y - r}" '
                f'stroke="{colour}" stroke-width="2.2"/>')
    return (
        f'<g class="message" data-type="{_e(message.type)}" data-sender="{message.sender}" data-receiver="{message.receiver}">'
        f"<title>{_e(message.sender)}→{_e(message.receiver)} {_e(label)}: {_e(timing)}{_e(tail)}</title>"
        f'<line x1="{start:.1f}" y1="{y}" x2="{end:.1f}" y2="{y}" stroke="{colour}" stroke-width="1.6"{dash}'
        + ("" if message.receive_ns is None else f' marker-end="url(#arrow-{marker}-{number})"')
        + f"/>{text}{lost}</g>"
    )


def _state_row(change: StateChange, y: float, col: Mapping[int, float], width: int) -> str:
    if change.member not in col:
        return ""
    cx = col[change.member]
    full = " → ".join([change.from_state, *change.path])
    text = full
    anchor_right = cx + 10 + len(text) * CHAR_PX > width - 8
    room = ((cx - 128) if anchor_right else (width - cx - 18)) / CHAR_PX
    if len(text) > room and len(change.path) > 2:
        text = f"{change.from_state} → {change.path[0]} → … → {change.path[-1]}"
    text = _fit(text, room)
    final = change.path[-1]
    colour = state_colour(final)
    term = f" (term {change.leadership_term_id}, leader {change.leader_id})" if isinstance(change.leader_id, int) and change.leader_id >= 0 else ""
    box_x = cx - 5
    anchor = ' text-anchor="end"' if anchor_right else ""
    tx = cx - 10 if anchor_right else cx + 10
    return (
        f'<g class="state-change" data-member="{change.member}" data-state="{_e(final)}">'
        f'<title>member {change.member}: {_e(full)}{_e(term)}</title>'
        f'<rect x="{box_x:.1f}" y="{y - 6}" width="10" height="12" rx="2" fill="{colour}" stroke="#475569"/>'
        f'<text x="{tx:.1f}" y="{y + 4}" class="note"{anchor}>{_e(text)}</text></g>'
    )


def sequence_legend_html() -> str:
    parts = ['<div class="legend" data-legend="sequence">']
    for name, colour in MESSAGE_COLOURS.items():
        parts.append(f'<span><b style="color:{colour}">⟶</b>{_e(name)}</span>')
    parts.append(f'<span><b style="color:{NEGATIVE_VOTE}">⟶</b>Vote ✗ (refused)</span>')
    parts.append("<span><b>- - ✕</b>sent, no receipt recorded</span>")
    parts.append("<span><b>×N</b>the same message N times (first shown)</span>")
    parts.append("<span><b>▪</b>election state change</span>")
    parts.append("</div>")
    return "".join(parts)


# -- the page -------------------------------------------------------------------------------------------

CSS = """
:root { --ink:#0f172a; --muted:#64748b; --line:#e2e8f0; --bad:#dc2626; --good:#15803d; }
* { box-sizing: border-box; }
body { margin: 0; padding: 24px 32px 48px; color: var(--ink); background: #f8fafc;
  font: 14px/1.45 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", "DejaVu Sans", Arial, sans-serif; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 17px; margin: 30px 0 8px; border-bottom: 1px solid var(--line); padding-bottom: 4px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.sub { color: var(--muted); margin: 0 0 14px; }
.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 14px 16px; margin: 10px 0; overflow-x: auto; }
.facts { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 8px 20px; }
.facts div b { display: block; font-size: 11px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); font-weight: 600; }
.verdict { padding: 10px 14px; border-radius: 8px; font-weight: 600; margin: 12px 0; }
.verdict.ok { background: #dcfce7; color: #14532d; } .verdict.bad { background: #fee2e2; color: #7f1d1d; }
table { border-collapse: collapse; font-size: 13px; } th, td { text-align: left; padding: 4px 10px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; font-size: 12px; }
code, td.mono, .mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 12px; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; font-size: 12px; color: #334155; margin: 8px 0 2px; }
.legend i { display: inline-block; width: 14px; height: 10px; border: 1px solid #94a3b8; margin-right: 5px; vertical-align: -1px; }
.legend i.hatch { background: repeating-linear-gradient(45deg, #fee2e2 0 3px, #ef4444 3px 5px); }
.legend b { margin-right: 5px; } .legend .tri { color: var(--bad); }
svg text { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 11px; }
svg .lane-label, svg .head { font-family: -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; font-size: 13px; font-weight: 600; fill: #0f172a; }
svg .axis, svg .small, svg .time { font-size: 10px; fill: #64748b; } svg .term-label { fill: #15803d; font-weight: bold; }
svg .msg, svg .note { paint-order: stroke; stroke: #fff; stroke-width: 3px; stroke-linejoin: round; }
svg .span-label { font-size: 10.5px; }
.files .pair { display: flex; flex-wrap: wrap; gap: 8px 28px; } .files .pair > div { min-width: 0; }
.changed { background: #fef9c3; }
.none { color: var(--muted); font-style: italic; }
footer { margin-top: 36px; color: var(--muted); font-size: 12px; }
"""


def render_html(incident: Incident, *, command: str | None = None) -> str:
    """The whole page.  ``command`` is the command line that reproduces it, shown in the footer."""
    clock = _Clock(incident.start_ns)
    title = f"recount incident report: {incident.source}"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title><style>{CSS}</style></head><body>",
        f'<h1>Aeron Cluster incident: <span class="mono">{_e(incident.source)}</span></h1>',
        f'<p class="sub">Replayed by recount against a model of Aeron {_e(incident.model)}: each member re-run from what it '
        "received, and compared with what it sent.</p>",
        _facts(incident, clock),
        _verdict(incident),
        '<h2 id="timeline">Members over time</h2>',
        '<div class="card">',
        lanes_svg(incident, incident.start_ns, incident.end_ns),
        legend_html(),
        "</div>",
        _terms_section(incident, clock),
        _elections_section(incident, clock),
        _problems_section(incident, clock),
        _files_section(incident),
        "<footer>Made by <code>recount report</code>"
        + (f" (<code>{_e(command)}</code>)" if command else "")
        + f". Times are seconds from the first recorded event ({_e(clock.wall(incident.start_ns) or 'its own clock')}). "
        f"Trace sha256 <code>{_e(incident.summary.get('traceSha256', ''))}</code>: "
        f"<code>recount replay {_e(incident.source)} --json</code> prints the same trace.</footer>",
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _facts(incident: Incident, clock: _Clock) -> str:
    wall = clock.wall(incident.start_ns)
    leaders = ", ".join(f"{t.leadership_term_id}→{t.leader}" for t in incident.terms) or "none"
    facts = [
        ("recording", incident.source),
        ("model", f"Aeron {incident.model}"),
        ("members", ", ".join(map(str, incident.members))),
        ("starts", wall or clock.seconds(incident.start_ns)),
        ("lasts", _duration(incident.end_ns - incident.start_ns)),
        ("elections", str(len(incident.elections))),
        ("leaders (term→member)", leaders),
        ("divergences", str(len(incident.divergences))),
        ("invariant violations", str(len(incident.invariants))),
        ("consensus messages", f"{len(incident.messages)} ({sum(1 for m in incident.messages if m.send_ns is not None and m.receive_ns is not None)} with both ends recorded)"),
    ]
    cells = "".join(f"<div><b>{_e(k)}</b>{_e(v)}</div>" for k, v in facts)
    return f'<div class="card facts" data-facts="1">{cells}</div>'


def _verdict(incident: Incident) -> str:
    divergences, invariants = len(incident.divergences), len(incident.invariants)
    if not divergences and not invariants:
        return ('<div class="verdict ok" data-verdict="ok">No divergence and no broken invariant: the model of Aeron '
                f"{_e(incident.model)} does what every member did in the recording.</div>")
    first = min((p.ts for p in incident.problems if isinstance(p.ts, int)), default=None)
    return (f'<div class="verdict bad" data-verdict="bad">{divergences} divergence(s) and {invariants} invariant violation(s); '
            f'the first at {_e(_Clock(incident.start_ns).seconds(first))} — see <a href="#problems">below</a>.</div>')


def _terms_section(incident: Incident, clock: _Clock) -> str:
    if not incident.terms:
        return '<h2 id="terms">Leader of each term</h2><div class="card"><p class="none">No member became leader in this recording.</p></div>'
    rows = []
    for term in incident.terms:
        election = next((e for e in incident.elections if e.start_ns <= term.elected_ns <= e.end_ns), None)
        began = clock.seconds(election.start_ns) if election else "–"
        took = _duration(term.elected_ns - election.start_ns) if election else "–"
        link = f'<a href="#election-{election.number}">election {election.number}</a>' if election else "–"
        followers = ", ".join(map(str, term.followers)) or "none recorded"
        rows.append(
            f'<tr data-term="{term.leadership_term_id}" data-leader="{term.leader}"><td class="mono">{term.leadership_term_id}</td>'
            f"<td><b>member {term.leader}</b></td><td class=\"mono\">{_e(clock.seconds(term.elected_ns, 6))}</td>"
            f"<td class=\"mono\">{_e(began)}</td><td class=\"mono\">{_e(took)}</td><td>{_e(followers)}</td><td>{link}</td></tr>"
        )
    return (
        '<h2 id="terms">Leader of each term</h2><div class="card"><table class="terms"><thead><tr>'
        "<th>leadershipTermId</th><th>leader</th><th>became leader at</th><th>election began</th><th>took</th>"
        "<th>followers that reached FOLLOWER_READY</th><th></th></tr></thead><tbody>"
        + "".join(rows) + "</tbody></table></div>"
    )


def _elections_section(incident: Incident, clock: _Clock) -> str:
    parts = ['<h2 id="elections">Elections</h2>']
    if not incident.elections:
        parts.append('<div class="card"><p class="none">No election in this recording.</p></div>')
        return "".join(parts)
    for election in incident.elections:
        won = "; ".join(f"term {t.leadership_term_id} won by member {t.leader}" for t in election.terms)
        joined = sorted({(c.member, c.leadership_term_id, c.leader_id) for c in election.changes if "FOLLOWER_READY" in c.path})
        if not won and joined:
            won = "; ".join(f"member {m} joined term {term} under leader {leader}" for m, term, leader in joined)
        outcome = won or "no leader elected within it"
        reasons = "; ".join(f"member {r}" for r in election.reasons) or "–"
        pad = max((election.end_ns - election.start_ns) // 20, 1_000_000)
        parts.append(
            f'<section class="election" id="election-{election.number}" data-election="{election.number}">'
            f"<h3>Election {election.number}: {_e(clock.seconds(election.start_ns))} → {_e(clock.seconds(election.end_ns))} "
            f"({_e(_duration(election.end_ns - election.start_ns))}) — {_e(outcome)}</h3>"
            f'<p class="sub">Members in it: {_e(", ".join(map(str, election.members)))}. Why it started: {_e(reasons)}.</p>'
            '<div class="card">'
            + lanes_svg(incident, max(election.start_ns - pad, incident.start_ns), min(election.end_ns + pad, incident.end_ns),
                        detail=False, label=f"election {election.number}")
            + "</div><div class=\"card\">"
            + sequence_svg(election, incident)
            + sequence_legend_html()
            + "</div></section>"
        )
    return "".join(parts)


def _problems_section(incident: Incident, clock: _Clock) -> str:
    head = '<h2 id="problems">Divergences and invariant violations</h2>'
    if not incident.problems:
        return head + '<div class="card"><p class="none" data-problems="0">None: every member did what the model does.</p></div>'
    rows = []
    for problem in incident.problems[:MAX_PROBLEM_TABLE]:
        record = problem.record
        state = record.get("state") or {}
        where = (f"{state.get('electionState')} / {state.get('role')}, term {state.get('leadershipTermId')}"
                 if state else "")
        if problem.kind == "divergence":
            cause = (f"expected {_outline(record.get('expected'))}; the model: {_outline(record.get('actual'))}")
            event = record.get("event")
            ref = f"recorded event {event}" if event is not None else ""
        else:
            cause = f"{record.get('name')}: {record.get('detail')}"
            ref = ""
        rows.append(
            f'<tr class="problem" data-kind="{problem.kind}" data-member="{_e(problem.member)}"><td class="mono">{_e(clock.seconds(problem.ts, 6))}</td>'
            f"<td>{_e(problem.member)}</td><td><b>{_e(problem.kind)}</b></td><td class=\"mono\">{_e(cause)}</td>"
            f"<td>{_e(where)}</td><td class=\"mono\">{_e(ref)}</td></tr>"
        )
    more = len(incident.problems) - MAX_PROBLEM_TABLE
    tail = (f'<p class="sub">… and {more} more: <code>recount replay {_e(incident.source)} --json | '
            "jq -c 'select(.kind==\"divergence\" or .kind==\"invariant\")'</code> lists them all.</p>" if more > 0 else "")
    return (head + '<div class="card"><table><thead><tr><th>time</th><th>member</th><th>what</th><th>cause</th>'
            "<th>member's state</th><th>evidence</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>" + tail + "</div>")


def _outline(side: Any) -> str:
    """A divergence side (a recorded or model send or observation) in `describe`'s words."""
    if side is None:
        return "nothing"
    if isinstance(side, Mapping) and "type" in side:
        fields = side.get("fields") or {}
        if side.get("dir") == "local":
            return f"{side.get('type')} " + " ".join(f"{k}={v}" for k, v in fields.items())
        return f"{side.get('node')}→{side.get('peer')} " + describe_fields(str(side["type"]), fields, side.get("node"), side.get("peer"))
    return str(side)


def _files_section(incident: Incident) -> str:
    parts = ['<h2 id="files">Members\' files: node-state.dat and recording.log, at the start and at the end</h2>'
             '<p class="sub">At the start: as each member found them when it first started. At the end: as the replay '
             'left them. What changed is highlighted.</p><div class="files">']
    for files in incident.files:
        parts.append(f'<div class="card member-files" data-member="{files.member}"><h3>member {files.member}</h3>')
        lane = next((lane for lane in incident.lanes if lane.member == files.member), None)
        last_down = lane.down[-1] if lane is not None and lane.down else None
        if last_down is not None and not last_down.restarted:
            what = "crash" if last_down.cause == "crash" else "stop"
            parts.append(f'<p class="sub">Down at the end: "at end" is what it left at its {what} at '
                         f"{_e(_Clock(incident.start_ns).seconds(last_down.start_ns))}.</p>")
        parts.append("<p><b>node-state.dat</b> (candidateTerm)</p>")
        parts.append('<table class="node-state"><thead><tr><th></th><th>candidateTermId</th><th>logPosition</th><th>timestamp</th></tr></thead><tbody>')
        for label, state in (("at start", files.node_state_start), ("at end", files.node_state_end)):
            if state is None:
                parts.append(f'<tr><td>{label}</td><td colspan="3" class="none">not known</td></tr>')
                continue
            changed = ' class="changed"' if label == "at end" and state != files.node_state_start else ""
            parts.append(f"<tr{changed}><td>{label}</td>" + "".join(
                f'<td class="mono">{_e(state.get(k))}</td>' for k in ("candidateTermId", "logPosition", "timestamp")) + "</tr>")
        parts.append('</tbody></table><div class="pair">')
        for label, entries in (("at start", files.recording_log_start), ("at end", files.recording_log_end)):
            parts.append(f"<div><p><b>recording.log {label}</b></p>")
            parts.append(_recording_log_table(entries, files.recording_log_start if label == "at end" else None))
            parts.append("</div>")
        parts.append("</div></div>")
    parts.append("</div>")
    return "".join(parts)


def _recording_log_table(entries: Sequence[Mapping[str, Any]], before: Sequence[Mapping[str, Any]] | None) -> str:
    if not entries:
        return '<p class="none">empty</p>'
    keys = ("entryIndex", "type", "leadershipTermId", "termBaseLogPosition", "logPosition", "recordingId", "serviceId", "timestamp", "isValid")
    earlier = {tuple(sorted(e.items())) for e in before} if before is not None else None
    rows = []
    for entry in entries:
        changed = ' class="changed"' if earlier is not None and tuple(sorted(entry.items())) not in earlier else ""
        rows.append(f"<tr{changed}>" + "".join(f'<td class="mono">{_e(entry.get(k))}</td>' for k in keys) + "</tr>")
    head = "".join(f"<th>{k}</th>" for k in keys)
    return f'<table class="recording-log"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


__all__ = ["lanes_svg", "render_html", "sequence_svg"]
