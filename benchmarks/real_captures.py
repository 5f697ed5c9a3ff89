"""How faithfully every real capture replays: issue 12's table, measured (`recorder.conformance`).

    python benchmarks/real_captures.py [ROOT] [--only NAME] [--json] [--write-baseline FILE]

Walks ROOT (default ``../shared/reference/aeron-1.47.3-capture`` beside the checkout) for capture
folders (a pcap/pcapng and ``nodeN/`` member directories), so a capture dropped in is picked up
without code changes.  Each is converted from its capture, its members' directories as copied after
the incident (never the ``before/`` copies) and their agent logs, replayed, and held against the
members' agent logs; then the same without the agent logs as inputs (they still judge).  Printed:

* state changes reproduced: ELECTION_STATE_CHANGEs the model made in the logged order, less the
  changes it made that the real member never did, over those logged; ``+k`` after it is that extra;
* the same with every field the line prints;
* role changes, NewLeadershipTerms handled, and the RequestVote/Vote/NewLeadershipTerm sends per
  receiver (distinct runs), each as reproduced/expected;
* divergences reported by the replay (runs of one cause, `engine.divergences`), the failed checks they
  hold, and how many of them the replay blames on the model rather than on timing or missing
  evidence; and the seconds to convert and to replay.

``--write-baseline FILE`` also writes these figures as JSON, per capture and with/without agent
logs: the baseline that ``tests/test_real_capture_conformance.py`` holds each capture to (kept in
``tests/testdata/conformance/``; rewrite it when a change improves the figures, and read the diff).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recorder.conformance import CaptureReport, find_capture_folders, run_capture  # noqa: E402

DEFAULT = ROOT.parent / "shared" / "reference" / "aeron-1.47.3-capture"


def _cell(report: CaptureReport, what: str) -> str:
    score = report.sends if what == "sends" else report.total(what)
    extra = f" +{score.extra}" if score.extra else ""
    return f"{score.reproduced}/{score.expected}{extra}"


def _causes(report: CaptureReport) -> str:
    causes = report.causes
    return (f"{report.divergences} ({report.divergence_checks}): {causes.get('evidence', 0)}/{causes.get('timing', 0)}/"
            f"{causes.get('model', 0)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", default=str(DEFAULT))
    parser.add_argument("--only", help="only capture folders whose name contains this")
    parser.add_argument("--json", action="store_true", help="one JSON document per run instead of the table")
    parser.add_argument("--write-baseline", metavar="FILE", help="write the figures as the conformance baseline")
    args = parser.parse_args(argv)
    folders = [f for f in find_capture_folders(args.root) if not args.only or args.only in f.name]
    if not folders:
        print(f"no capture folders under {args.root}", file=sys.stderr)
        return 2
    rows = []
    baseline = {}
    for folder in folders:
        with_logs = run_capture(folder, agent_logs=True)
        without = run_capture(folder, agent_logs=False)
        baseline[folder.name] = {"withAgentLogs": with_logs.figures(), "withoutAgentLogs": without.figures()}
        if args.json:
            for report in (with_logs, without):
                print(json.dumps(report.to_json()))
            continue
        rows.append((folder.name, with_logs, without))
        print(f"{folder.name}: with logs {with_logs.convert_s:.1f}+{with_logs.replay_s:.1f} s, without "
              f"{without.convert_s:.1f}+{without.replay_s:.1f} s (convert+replay)", file=sys.stderr, flush=True)
    if args.write_baseline:
        Path(args.write_baseline).write_text(json.dumps(baseline, indent=1, sort_keys=True) + "\n")
        print(f"baseline written to {args.write_baseline}", file=sys.stderr)
    if args.json:
        return 0
    print("| capture | state changes reproduced | divergences | same, without agent logs |")
    print("|---|---|---|---|")
    for name, with_logs, without in rows:
        print(f"| {name} | {_cell(with_logs, 'states')} | {with_logs.divergences} | "
              f"{_cell(without, 'states')}, {without.divergences} |")
    print()
    print("Divergences: runs (failed checks) and by cause, evidence/timing/model (with agent logs / without):")
    print("| capture | with agent logs | without agent logs |")
    print("|---|---|---|")
    for name, with_logs, without in rows:
        print(f"| {name} | {_causes(with_logs)} | {_causes(without)} |")
    print()
    print("Detail (reproduced/expected, +extra; with agent logs / without):")
    print("| capture | states with fields | role changes | NewLeadershipTerm handled | RequestVote/Vote/NLT sent |")
    print("|---|---|---|---|---|")
    for name, with_logs, without in rows:
        cells = [f"{_cell(with_logs, what)} / {_cell(without, what)}"
                 for what in ("states_with_fields", "roles", "new_terms", "sends")]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
