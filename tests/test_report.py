"""`recount report`: one self-contained HTML page, checked as a browser shows it and as text.

The page of the leader-failover sample is rendered by headless Chromium (Debian's `chromium`, which
.ci/run installs; the browser tests skip, saying so, where it is missing): the DOM Chromium built
must hold a lane per member, the leader of each term, a sequence diagram per election with its
votes, and the divergences; the screenshot must show something.  Other tests read the HTML string:
it references nothing outside itself and is the same bytes for the same recording.

The committed report and trace of the leader-failover sample are regression pins of our own output.
"""

from __future__ import annotations

import json
import re
import shutil
import struct
import subprocess
import zlib
from html.parser import HTMLParser
from pathlib import Path

import pytest

from cli.app import run
from recorder import convert
from recorder.report import build_incident
from recorder.report.html import MAX_PROBLEM_ROWS, render_html

ROOT = Path(__file__).resolve().parents[1]
FAILOVER = ROOT / "samples" / "leader-failover" / "incident.arrow"
HOST0 = ROOT / "samples" / "leader-failover" / "host0.pcap"
SAMPLES = sorted((ROOT / "samples").glob("*/incident.arrow"))
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars")


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("headless Chromium not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return found


def _browser(tmp_path: Path, page: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [_chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}", *args, page.as_uri()],
        capture_output=True, text=True, timeout=120, check=False,
    )


class _Elements(HTMLParser):
    """Every start tag with its attributes, and the text of the document."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, {k: v or "" for k, v in attrs}))

    def handle_data(self, data):
        self.text.append(data)

    def having(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        return [a for t, a in self.tags if t == tag and all(a.get(k.replace("_", "-")) == v for k, v in attrs.items())]


def _parse(document: str) -> _Elements:
    parser = _Elements()
    parser.feed(document)
    return parser


def _report(path: Path) -> str:
    loaded = convert.load(str(path))
    incident = build_incident(loaded.events, source=path.name, refs=loaded.refs, ref_kind=loaded.ref_kind)
    return render_html(incident)


@pytest.fixture(scope="module")
def failover_page(tmp_path_factory) -> Path:
    page = tmp_path_factory.mktemp("report") / "incident.html"
    assert run(["report", str(FAILOVER), "-o", str(page)]) == 0
    return page


@pytest.fixture(scope="module")
def failover_dom(failover_page: Path, tmp_path_factory) -> _Elements:
    result = _browser(tmp_path_factory.mktemp("chromium"), failover_page, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "<svg" in result.stdout
    return _parse(result.stdout)


def test_chromium_shows_a_lane_per_member_with_the_crash_of_member_0(failover_dom):
    lanes = failover_dom.having("g", **{"class": "lane"})
    assert sorted({lane["data-member"] for lane in lanes}) == ["0", "1", "2"]
    downs = failover_dom.having("g", **{"class": "down"})
    assert [d["data-cause"] for d in downs][:1] == ["crash"]
    states = {a["data-value"] for a in failover_dom.having("rect", **{"class": "state"})}
    assert {"NOMINATE", "CANDIDATE_BALLOT", "FOLLOWER_BALLOT", "CLOSED"} <= states


def test_chromium_shows_the_leader_of_each_term(failover_dom):
    rows = failover_dom.having("tr")
    leaders = {(r["data-term"], r["data-leader"]) for r in rows if "data-term" in r}
    assert leaders == {("0", "0"), ("1", "1")}
    marks = {(g["data-term"], g["data-leader"]) for g in failover_dom.having("g", **{"class": "term-mark"})}
    assert ("1", "1") in marks
    assert "term 1: leader 1" in "".join(failover_dom.text)


def test_chromium_shows_each_election_as_a_sequence_diagram_of_its_votes(failover_dom):
    diagrams = failover_dom.having("svg", **{"class": "sequence"})
    assert [d["data-election"] for d in diagrams] == ["1", "2"]
    messages = failover_dom.having("g", **{"class": "message"})
    kinds = {(m["data-type"], m["data-sender"], m["data-receiver"]) for m in messages}
    # term 1: member 1 asks 2 for its vote, 2 grants it, 1 announces the new term to 2
    assert {("RequestVote", "1", "2"), ("Vote", "2", "1"), ("NewLeadershipTerm", "1", "2")} <= kinds
    # ... and nothing to the dead member 0: its publication had heard no status message from 0 for the
    # publication connection timeout (5 s), so Aeron refused the offer (NOT_CONNECTED) and so did the model
    assert not {k for k in kinds if k[2] == "0" and k[0] in ("RequestVote", "NewLeadershipTerm")}
    assert "no divergence" in "".join(failover_dom.text).lower()


def test_chromium_lists_every_divergence_of_a_one_host_capture(tmp_path):
    page = tmp_path / "host0.html"
    assert run(["report", str(HOST0), "-o", str(page)]) == 0
    result = _browser(tmp_path, page, "--dump-dom")
    assert result.returncode == 0, result.stderr[-2000:]
    dom = _parse(result.stdout)
    rows = dom.having("tr", **{"class": "problem"})
    # 7 divergence records: the runs of one cause each (engine.divergences), not the 91 checks behind them
    assert len(rows) == 7 and {r["data-kind"] for r in rows} == {"divergence"}
    assert dom.having("div", **{"data-verdict": "bad"})
    assert len(dom.having("text", **{"class": "problem-row note"})) <= 7


def test_a_sequence_diagram_shows_the_first_problems_of_an_election_and_counts_the_rest():
    import dataclasses

    loaded = convert.load(str(HOST0))
    incident = build_incident(loaded.events, source=HOST0.name, refs=loaded.refs, ref_kind=loaded.ref_kind)
    election = incident.elections[-1]
    inside = [p for p in incident.problems if election.start_ns <= p.ts <= election.end_ns]
    assert inside
    many = tuple(inside) * (MAX_PROBLEM_ROWS // len(inside) + 3)
    page = _parse(render_html(dataclasses.replace(incident, problems=many)))
    assert len(page.having("text", **{"class": "problem-row note"})) == MAX_PROBLEM_ROWS
    assert f"and {len(many) - MAX_PROBLEM_ROWS} more divergences" in "".join(page.text)


def _png_size_and_variety(path: Path) -> tuple[int, int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    chunks, offset = [], 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    return width, height, len(set(zlib.decompress(b"".join(chunks))))


def test_chromium_draws_the_page_as_a_picture(failover_page, tmp_path):
    shot = tmp_path / "report.png"
    result = _browser(tmp_path, failover_page, f"--screenshot={shot}", "--window-size=1280,1400")
    assert result.returncode == 0 and shot.exists(), result.stderr[-2000:]
    width, height, variety = _png_size_and_variety(shot)
    assert (width, height) == (1280, 1400)
    assert variety > 100  # a blank or unstyled page has a handful of distinct bytes


def test_the_page_fetches_nothing_and_runs_no_script():
    page = _report(FAILOVER)
    assert "<script" not in page and "<link" not in page and "@import" not in page
    assert not re.findall(r'\b(?:src|href)="(?!#)', page)
    assert not re.findall(r"url\((?!#)", page)
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "https://" not in page


def test_the_same_recording_gives_the_same_page():
    assert _report(FAILOVER) == _report(FAILOVER)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.parent.name)
def test_every_sample_has_a_report_with_its_lanes_elections_and_files(sample):
    page = _report(sample)
    dom = _parse(page)
    assert {lane["data-member"] for lane in dom.having("g", **{"class": "lane"})} == {"0", "1", "2"}
    assert dom.having("svg", **{"class": "sequence"})
    assert {f["data-member"] for f in dom.having("div", **{"class": "card member-files"})} == {"0", "1", "2"}


def test_report_refuses_to_overwrite_without_force_and_names_the_path_given(tmp_path, capsys):
    out = tmp_path / "incident.html"
    out.write_text("mine")
    assert run(["report", str(FAILOVER), "-o", str(out)]) == 2
    assert f"{out}: exists (use --force" in capsys.readouterr().err
    assert out.read_text() == "mine"
    assert run(["report", str(FAILOVER), "-o", str(out), "--force", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["out"] == str(out) and [t["leader"] for t in summary["terms"]] == [0, 1]
    assert summary["bytes"] == out.stat().st_size


def test_report_to_a_missing_directory_names_the_path_given(tmp_path, capsys):
    given = str(tmp_path / "missing" / "x.html")
    assert run(["report", str(FAILOVER), "-o", given]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"recount: {given}: directory ") and err.count("\n") == 1


def test_report_of_a_missing_file_is_one_line_naming_it(tmp_path, capsys):
    assert run(["report", str(tmp_path / "nope.arrow"), "-o", str(tmp_path / "x.html")]) == 2
    assert "nope.arrow: no such file" in capsys.readouterr().err
    assert not (tmp_path / "x.html").exists()


def test_report_help_has_an_example(capsys):
    assert run(["report", "--help"]) == 0
    assert "recount report samples/leader-failover/incident.arrow -o incident.html" in capsys.readouterr().out


def test_a_real_aeron_capture_gives_a_report_and_a_trace(capture, tmp_path, capsys):
    from tests.test_export import check_trace_event_format
    from tests.test_real_capture_replay import MEMBERS, _inputs

    replay_file = tmp_path / "real.arrow"
    assert run(["convert", *_inputs(capture), "--members", MEMBERS, "-o", str(replay_file)]) == 0
    capsys.readouterr()
    assert run(["report", str(replay_file), "-o", str(tmp_path / "real.html"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    # the real cluster elected member 1 for term 0 at startup (the capture's README), and nothing diverged
    assert [(t["leadershipTermId"], t["leader"]) for t in summary["terms"]] == [(0, 1)]
    assert summary["divergences"] == 0 and summary["pairedMessages"] > 0
    dom = _parse((tmp_path / "real.html").read_text())
    assert {lane["data-member"] for lane in dom.having("g", **{"class": "lane"})} == {"0", "1", "2"}
    assert run(["export", str(replay_file), "-o", str(tmp_path / "real.json")]) == 0
    counted = check_trace_event_format(json.loads((tmp_path / "real.json").read_text()))
    assert counted["flows"] == summary["pairedMessages"]


def test_the_leader_failover_report_and_trace_in_samples_are_up_to_date(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    for command, name in (("report", "report.html"), ("export", "trace.json")):
        fresh = tmp_path / name
        assert run([command, "samples/leader-failover/incident.arrow", "-o", str(fresh)]) == 0
        committed = ROOT / "samples" / "leader-failover" / "report" / name
        assert fresh.read_bytes() == committed.read_bytes(), (
            f"{committed.relative_to(ROOT)} is out of date: regenerate it with "
            f"`recount {command} samples/leader-failover/incident.arrow -o samples/leader-failover/report/{name} --force`"
        )


def test_a_long_replay_reports_progress_on_stderr_and_keeps_stdout_json(tmp_path, monkeypatch, capsys):
    import cli.commands.report as report_command

    monkeypatch.setattr(report_command, "PROGRESS_MIN_EVENTS", 1)
    calls: list[tuple[int, int]] = []
    loaded = convert.load(str(FAILOVER))
    build_incident(loaded.events, source="x", on_progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, len(loaded.events)) and calls[-1] == (len(loaded.events),) * 2
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)
    assert run(["report", str(FAILOVER), "-o", str(tmp_path / "r.html"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["terms"]
