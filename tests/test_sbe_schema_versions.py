"""Cluster schema versions 10 … 15: Aeron 1.41.7's (v10), 1.47.3's (v12) and 1.50.4's (v15) official
XMLs checked against recount's codecs, and every message of the real 1.41.7 and 1.50.4 captures
read and written back byte for byte at the version in its own header.

`formats.cluster_codecs` is generated from the v12 XML (tests/test_sbe_codecs.py checks that);
`formats.cluster_codecs_ext` adds what v13-v15 added.  Every layout an older or newer XML gives must
be what our specs give at that version: the fields up to it, at the same offsets, and the block
length an encoder of it writes (`formats.sbe.acting_block_length`).
"""

from __future__ import annotations

import struct

import pytest

from formats import cluster_codecs as generated
from formats.cluster_codecs_ext import MESSAGES_BY_TEMPLATE_ID_V15, NEWEST_SCHEMA_VERSION, decode_message
from formats.sbe import acting_block_length, encode
from tests.conftest import SCHEMAS, VERSIONS_CAPTURES
from tests.test_real_capture_replay import MEMBERS
from tests.tools.gen_sbe_codecs import parse_schema

XMLS = {
    10: VERSIONS_CAPTURES / "aeron-cluster-codecs-1.41.7.xml",
    12: SCHEMAS / "aeron-cluster-codecs.xml",
    15: VERSIONS_CAPTURES / "aeron-cluster-codecs-1.50.4.xml",
}


def _xml(version: int):
    path = XMLS[version]
    if not path.exists():
        pytest.skip(f"Aeron reference material not found at {path} (it sits beside the checkout in CI only)")
    return parse_schema(path)


def _check_block(xml_block, spec_block, version: int, label: str) -> None:
    ours = [f for f in spec_block.fields if f.since_version <= version]
    assert [(f.name, f.offset, f.primitive, f.since_version) for f in xml_block.fields] == [
        (f.name, f.offset, f.primitive, f.since_version) for f in ours], label
    assert xml_block.block_length == acting_block_length(spec_block, version), label
    ours_groups = [g for g in spec_block.groups if g.since_version <= version]
    assert [g.name for g in xml_block.groups] == [g.name for g in ours_groups], label
    for xml_group, group in zip(xml_block.groups, ours_groups, strict=True):
        _check_block(xml_group.entry, group.entry, version, f"{label}.{group.name}")
    assert [(v.name, v.is_ascii, v.since_version) for v in xml_block.var_data] == [
        (v.name, v.is_ascii, v.since_version) for v in spec_block.var_data if v.since_version <= version], label


@pytest.mark.parametrize("version", sorted(XMLS))
def test_every_message_of_the_official_xml_is_our_layout_at_that_version(version):
    schema = _xml(version)
    assert (schema.id, schema.version) == (generated.SCHEMA_ID, version)
    for message in schema.messages:
        spec = MESSAGES_BY_TEMPLATE_ID_V15[message.template_id]
        assert spec.block.name == message.name
        _check_block(message.block, spec.block, version, message.name)
    # The messages a version lacks are those our specs date after it (StandbySnapshot: v11).
    ours = {t for t, spec in MESSAGES_BY_TEMPLATE_ID_V15.items() if spec.since_version <= version}
    assert {m.template_id for m in schema.messages} == ours


def test_the_newest_xml_is_the_newest_version_our_codecs_know():
    assert _xml(15).version == NEWEST_SCHEMA_VERSION
    assert 81 not in {m.template_id for m in _xml(10).messages}  # StandbySnapshot came with v11


@pytest.fixture(scope="module", params=["1.41.7", "1.50.4"])
def captured(request, tmp_path_factory):
    from recorder.convert import convert, read_replay_file

    scenario = VERSIONS_CAPTURES / f"v{request.param}_a_clean_start"
    if not scenario.exists():
        pytest.skip(f"Aeron reference material not found at {scenario} (it sits beside the checkout in CI only)")
    out = tmp_path_factory.mktemp("schema") / "incident.arrow"
    result = convert([str(scenario / "capture.pcapng")], out, members=MEMBERS)
    return request.param, result, read_replay_file(out).events


def test_every_captured_message_reads_and_writes_back_byte_for_byte_at_its_own_version(captured):
    version, _, events = captured
    checked = 0
    for event in events:
        if event.payload is None or not (event.extra and "packet" in event.extra):
            continue
        _, _, schema_id, acting = struct.unpack_from("<HHHH", event.payload, 0)
        if schema_id != generated.SCHEMA_ID:
            continue
        again = encode(decode_message(event.payload).message, acting_version=acting)
        if event.type == "SessionMessageHeader":  # the application's message follows the header
            assert event.payload.startswith(again)
        else:
            assert again == event.payload, event.type
        checked += 1
    assert checked > 1000


def test_a_capture_says_which_schema_versions_it_carries(captured):
    version, result, events = captured
    assert result.capture["aeronVersion"]["schemaVersions"] == [{"1.41.7": 10, "1.50.4": 15}[version]]
    if version == "1.50.4":
        event = next(e for e in events if e.type == "SessionEvent")
        assert decode_message(event.payload).message.leader_heartbeat_timeout_ns == 10_000_000_000
