"""Aeron Archive's catalog (formats.archive_catalog): read against the real catalogs of the captured
Aeron 1.47.3 clusters, with ArchiveTool's own description of each as the judge; the layout against the
official archive schema; and damaged catalogs as clear errors that keep what was read."""

from __future__ import annotations

import json
import re
import struct
import sys
from pathlib import Path

import pytest

from cli.app import run
from formats import archive_catalog as ac
from formats.errors import DecodeError
from recorder import cluster_dir

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "tools"))


def _members(reference: Path) -> list[Path]:
    members = sorted(p.parent for p in (reference / "aeron-1.47.3-capture").glob("*/node*/archive.tar.gz"))
    assert members, "no archive.tar.gz in the real captures"
    return members


def _archivetool(path: Path) -> list[dict[str, str]]:
    """The ``[RecordingDescriptor]`` lines of ``ArchiveTool describe-all``: field -> text, plus state."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("[RecordingDescriptor]"):
            continue
        _, _, body = line.partition("):")
        *pairs, state = body.split("|")
        # Channels hold '|' themselves: rejoin the pieces that are not key=value after a quote opened.
        fields: dict[str, str] = {}
        key = None
        for piece in pairs:
            match = re.match(r"^(\w+)=(.*)$", piece)
            if match and (key is None or fields[key].count("'") % 2 == 0):
                key, value = match.groups()
                fields[key] = value
            else:
                fields[key] += "|" + piece
        fields = {k: v.strip("'") for k, v in fields.items()}
        fields["state"] = state
        out.append(fields)
    return out


def test_every_real_catalog_reads_as_archivetool_describes_it(reference):
    checked = 0
    for member in _members(reference):
        catalog = cluster_dir.load_archive_catalog(member / "archive.tar.gz")
        assert catalog.problem is None
        described = _archivetool(member / "archivetool-describe.txt")
        assert len(catalog.recordings) == len(described) > 0, member
        assert catalog.header.next_recording_id == len(described)
        for recording, expected in zip(catalog.recordings, described, strict=True):
            shown = recording.to_json()
            assert {k: str(shown[k]) for k in expected} == expected, (member, recording.recording_id)
            checked += 1
        # The cluster log's recording: alias log-cm where the member started it as leader, log as a
        # follower; on the default log stream 100, and no other recording is on it.
        log = catalog.log_recordings()
        assert len(log) == 1 and log[0].stream_id == 100
        assert [r for r in catalog.recordings if r.stream_id == 100] == list(log)
    assert checked >= 20


def test_the_layout_is_the_official_schemas(schemas):
    from gen_sbe_codecs import parse_schema

    schema = parse_schema(schemas / "aeron-archive-codecs.xml")
    messages = {m.name: m for m in schema.messages}
    descriptor = messages["RecordingDescriptor"].block
    assert descriptor.block_length == ac.DESCRIPTOR_BLOCK_LENGTH == ac.DESCRIPTOR_BLOCK.size
    assert tuple(f.name for f in descriptor.fields) == ac.BLOCK_FIELDS
    offsets = [f.offset for f in descriptor.fields]
    sizes = {"q": 8, "i": 4}
    ours = [0]
    for code in ac.DESCRIPTOR_BLOCK.format.lstrip("<")[:-1]:
        ours.append(ours[-1] + sizes[code])
    assert offsets == ours
    assert tuple(v.name for v in descriptor.var_data) == ac.STRING_FIELDS
    header = messages["CatalogHeader"].block
    assert [f.name for f in header.fields][:4] == ["version", "length", "nextRecordingId", "alignment"]
    assert header.block_length == ac.CATALOG_HEADER_LENGTH
    entry = messages["RecordingDescriptorHeader"].block
    assert [f.name for f in entry.fields][:3] == ["length", "state", "checksum"]
    assert entry.block_length == ac.DESCRIPTOR_HEADER_LENGTH


# -- catalogs made here, to damage --------------------------------------------------------------------


def _entry(recording_id: int, *, stop: int = 4096, state: int = 1, channel: str = "aeron:udp?alias=log-cm") -> bytes:
    block = ac.DESCRIPTOR_BLOCK.pack(7, 8, recording_id, 1000, 2000, 0, stop, 0, 1 << 27, 1 << 26, 1408, 42, 100)
    strings = b"".join(struct.pack("<I", len(s)) + s.encode() for s in (channel, channel, "127.0.0.1:1"))
    body = block + strings
    body += b"\0" * (-(len(body) + ac.DESCRIPTOR_HEADER_LENGTH) % 64)  # entries aligned to 64
    return struct.pack("<iii", len(body), state, 0).ljust(ac.DESCRIPTOR_HEADER_LENGTH, b"\0") + body


def _catalog(*entries: bytes, size: int = 4096) -> bytes:
    header = ac.CATALOG_HEADER.pack(0x030100, 32, len(entries), 64).ljust(32, b"\0")
    return (header + b"".join(entries)).ljust(size, b"\0")


def test_entries_are_read_until_the_first_empty_one():
    catalog = ac.read_catalog(_catalog(_entry(0, stop=9000), _entry(1, state=2, channel="aeron:ipc?alias=snapshot")))
    assert [(r.recording_id, r.stop_position, r.state_name, r.alias) for r in catalog.recordings] == [
        (0, 9000, "VALID", "log-cm"),
        (1, 4096, "DELETED", "snapshot"),
    ]
    assert catalog.recording(0).stop_position == 9000 and catalog.recording(5) is None


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda d: d[:400], "only"),  # torn in the second entry
        (lambda d: d[:32 + 4] + struct.pack("<i", 7) + d[40:], "RecordingDescriptorHeader.state"),
        (lambda d: d[:32] + struct.pack("<i", 20) + d[36:], "at least 92"),
    ],
)
def test_a_damaged_entry_keeps_what_came_before_and_says_where(damage, expected):
    good = _catalog(_entry(0), _entry(1))
    first_length = ac.DESCRIPTOR_HEADER_LENGTH + struct.unpack_from("<i", good, 32)[0]
    damaged = damage(good)
    catalog = ac.read_catalog(damaged, source="archive.catalog")
    assert expected in str(catalog.problem)
    assert str(catalog.problem).startswith("archive.catalog, offset ")
    if len(damaged) >= 32 + first_length and damaged[32:36] == good[32:36] and damaged[36:40] == good[36:40]:
        assert [r.recording_id for r in catalog.recordings] == [0]


def test_a_catalog_too_short_for_its_header_is_refused():
    with pytest.raises(DecodeError, match="a catalog header of 32 bytes"):
        ac.read_catalog(b"\0" * 10, source="x")
    with pytest.raises(DecodeError, match="alignment a power of two"):
        ac.read_catalog(ac.CATALOG_HEADER.pack(1, 32, 0, 48).ljust(64, b"\0"))


# -- recount inspect archive-catalog ---------------------------------------------------------------------


def test_inspect_finds_the_catalog_in_a_member_dir_and_prints_json(tmp_path, capsys):
    archive = tmp_path / "node0" / "archive"
    archive.mkdir(parents=True)
    (archive / "archive.catalog").write_bytes(_catalog(_entry(0, stop=5344)))
    assert run(["inspect", "archive-catalog", str(tmp_path / "node0"), "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["recordings"][0]["stopPosition"] == 5344
    assert document["recordings"][0]["alias"] == "log-cm"
    assert document["header"]["semanticVersion"] == "3.1.0"


def test_inspect_a_torn_catalog_shows_what_it_read_then_exits_2_naming_the_offset(tmp_path, capsys):
    path = tmp_path / "archive.catalog"
    path.write_bytes(_catalog(_entry(0, stop=777), _entry(1))[:400])
    assert run(["inspect", "archive-catalog", str(path)]) == 2
    captured = capsys.readouterr()
    assert "777" in captured.out  # the first recording is kept
    errors = captured.err.strip().splitlines()
    assert len(errors) == 1 and f"{path}, offset " in errors[0] and "torn catalog" in errors[0]
    assert "Traceback" not in captured.err


def test_inspect_reads_a_real_archive_tarball(reference, capsys):
    member = _members(reference)[0]
    assert run(["inspect", "archive-catalog", str(member / "archive.tar.gz")]) == 0
    out = capsys.readouterr().out
    assert "log-cm" in out and "VALID" in out


def test_inspect_without_a_catalog_is_one_line_and_exit_2(tmp_path, capsys):
    assert run(["inspect", "archive-catalog", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no archive.catalog" in err and len(err.strip().splitlines()) == 1
