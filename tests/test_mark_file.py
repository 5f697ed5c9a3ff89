"""Cluster mark files: both header placements, every field, the error log, ClusterTool's describe line."""

from __future__ import annotations

import datetime
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.errors import DecodeError
from formats.mark_file import MarkFile, component_type_name

STRINGS = ("/dev/shm/aeron", "aeron:ipc", "aeron:udp", "", "my.Authenticator", "/var/cluster")


def _mark_file(
    *,
    sbe_header: bool = True,
    version: int = 768,
    component_type: int = 1,
    strings: tuple[str, ...] = STRINGS,
    acting_version: int = 2,
    errors: tuple[tuple[int, int, int, str], ...] = (),
    error_buffer_length: int = 4096,
    header_length: int = 8192,
) -> bytearray:
    """A mark file laid out by hand from aeron-formats.md §6 (this test's own encoder)."""
    body = bytearray(128)
    struct.pack_into("<ii", body, 0, version, component_type)
    struct.pack_into("<qqqq", body, 8, 1_700_000_000_123, 1_700_000_000_000, 4242, 7)
    struct.pack_into("<iiiiiiiii", body, 40, 10, 104, 105, 101, 2, -1, header_length, error_buffer_length, 9)
    for text in strings[: 6 if acting_version >= 1 else 5]:
        body += struct.pack("<I", len(text)) + text.encode("ascii")
    head = struct.pack("<HHHH", 128, 200, 110, acting_version) if sbe_header else b""
    data = bytearray(head + body)
    data += bytes(header_length - len(data))
    log = bytearray(error_buffer_length)
    offset = 0
    for count, first, last, text in errors:
        encoded = text.encode()
        struct.pack_into("<iiqq", log, offset, 24 + len(encoded), count, last, first)
        log[offset + 24 : offset + 24 + len(encoded)] = encoded
        offset += (24 + len(encoded) + 7) & ~7
    return data + log


def test_a_1_47_file_has_the_sbe_header_first_and_every_field_decodes():
    mark = MarkFile.decode(_mark_file(errors=((3, 10, 20, "java.lang.Error: x\n"),)))
    assert (mark.body_offset, mark.acting_block_length, mark.acting_version) == (8, 128, 2)
    h = mark.header
    assert (h.version, h.component_type, h.activity_timestamp, h.start_timestamp, h.pid, h.candidate_term_id) == (
        768, 1, 1_700_000_000_123, 1_700_000_000_000, 4242, 7
    )
    assert (h.archive_stream_id, h.service_stream_id, h.consensus_module_stream_id, h.ingress_stream_id) == (10, 104, 105, 101)
    assert (h.member_id, h.service_id, h.header_length, h.error_buffer_length, h.cluster_id) == (2, -1, 8192, 4096, 9)
    assert (h.aeron_directory, h.control_channel, h.ingress_channel, h.service_name, h.authenticator,
            h.services_cluster_dir) == STRINGS
    assert [(e.offset, e.observation_count, e.first_observation_timestamp, e.last_observation_timestamp, e.encoded_error)
            for e in mark.errors] == [(8192, 3, 10, 20, "java.lang.Error: x\n")]


def test_a_pre_1_47_file_starts_with_the_body_and_is_read_as_aeron_1_47_reads_it():
    mark = MarkFile.decode(_mark_file(sbe_header=False))
    assert (mark.body_offset, mark.acting_version) == (0, 2)
    assert mark.header.services_cluster_dir == "/var/cluster"
    assert mark.to_clustertool_describe_body().startswith(
        "[MarkFileHeader](sbeTemplateId=200|sbeSchemaId=110|sbeSchemaVersion=2|sbeBlockLength=128):version=768|"
    )


def test_a_schema_v0_file_names_component_type_zero_null_and_has_no_services_cluster_dir():
    mark = MarkFile.decode(_mark_file(sbe_header=False, component_type=0, acting_version=0), legacy_version=0)
    assert mark.component_type_name == "NULL"
    assert mark.header.services_cluster_dir == ""
    assert mark.to_json()["componentType"] == "NULL"
    # Aeron 1.47.3's decoder names it with its own (v2) schema and shows the acting version.
    assert "|sbeSchemaVersion=0/2|" in mark.to_clustertool_describe_body()
    assert "componentType=UNKNOWN|" in mark.to_clustertool_describe_body()


@pytest.mark.parametrize(
    "value, version, name",
    [(0, 2, "UNKNOWN"), (4, 2, "STANDBY"), (4, 0, "SBE_UNKNOWN"), (3, 0, "BACKUP"), (99, 2, "SBE_UNKNOWN"),
     (-(2**31), 2, "NULL_VAL")],
)
def test_component_types_are_named_by_the_schema_version(value, version, name):
    assert component_type_name(value, version) == name


def test_a_file_with_the_v1_header_shows_acting_version_1_of_2():
    mark = MarkFile.decode(_mark_file(acting_version=1))
    assert "|sbeSchemaVersion=1/2|sbeBlockLength=128):" in mark.to_clustertool_describe_body()


def test_json_lists_the_header_fields_in_schema_order_then_layout_and_errors():
    document = MarkFile.decode(_mark_file()).to_json()
    assert list(document) == [
        "version", "componentType", "activityTimestamp", "startTimestamp", "pid", "candidateTermId",
        "archiveStreamId", "serviceStreamId", "consensusModuleStreamId", "ingressStreamId", "memberId", "serviceId",
        "headerLength", "errorBufferLength", "clusterId", "aeronDirectory", "controlChannel", "ingressChannel",
        "serviceName", "authenticator", "servicesClusterDir", "layout", "errors",
    ]
    assert document["componentType"] == "CONSENSUS_MODULE"


def test_error_records_are_read_until_a_zero_length_at_8_byte_alignment():
    errors = ((1, 5, 6, "a" * 13), (2, 7, 8, "b"))
    mark = MarkFile.decode(_mark_file(errors=errors))
    assert [e.offset for e in mark.errors] == [8192, 8192 + 40]
    assert [e.encoded_error for e in mark.errors] == ["a" * 13, "b"]


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:0], "empty file"),
        (lambda d: d[:100], "only 100 bytes"),
        (lambda d: bytes(len(d)), "all zeros"),
        (lambda d: d[:9000], "runs past the end of the file"),
        (lambda d: d[:8 + 128 + 6], "aeronDirectory length 14 runs past"),
        (lambda d: _patch(d, 8, struct.pack("<i", 0x01_00_00)), "version 65536 is not a cluster mark file version"),
        (lambda d: _patch(d, 8 + 64, struct.pack("<i", 100)), "headerLength 100 lies inside the MarkFileHeader"),
        (lambda d: _patch(d, 8192, struct.pack("<i", 12)), "distinct error record length 12"),
        (lambda d: _patch(d, 8192, struct.pack("<i", 100_000)), "distinct error record length 100000"),
    ],
    ids=["empty", "short", "zeros", "error-log-cut", "string-cut", "version", "header-length", "tiny-error",
         "huge-error"],
)
def test_damaged_mark_files_raise_decode_error(damage, message):
    data = bytes(damage(bytes(_mark_file(errors=((1, 1, 1, "x"),)))))
    with pytest.raises(DecodeError, match=message):
        MarkFile.decode(data, source="cluster-mark.dat")


def _patch(data: bytes, offset: int, value: bytes) -> bytes:
    return data[:offset] + value + data[offset + len(value) :]


def test_failed_and_not_yet_ready_versions_are_accepted():
    assert MarkFile.decode(_mark_file(version=-1)).is_ready is False
    assert MarkFile.decode(_mark_file(version=0)).is_ready is False
    assert MarkFile.decode(_mark_file(version=0x000201)).is_ready is True


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_decode_or_raise_decode_error_and_nothing_else(data):
    try:
        MarkFile.decode(data)
    except DecodeError as error:
        assert "\n" not in str(error)


# --- the real Aeron 1.47.3 files ---


@pytest.mark.parametrize("node", [0, 1, 2])
def test_the_describe_line_is_byte_for_byte_what_clustertool_printed(capture, node):
    lines = (capture / f"node{node}" / "clustertool" / "describe.txt").read_text().splitlines()
    printed = [line for line in lines if line.startswith("[MarkFileHeader]")]
    for name, line in zip(("cluster-mark.dat", "cluster-mark-service-0.dat"), printed, strict=True):
        assert MarkFile.decode((capture / f"node{node}" / name).read_bytes()).to_clustertool_describe_body() == line


@pytest.mark.parametrize("node", [0, 1, 2])
def test_the_error_logs_hold_what_clustertool_errors_printed(capture, node):
    printed = (capture / f"node{node}" / "clustertool" / "errors.txt").read_text()
    for name in ("cluster-mark.dat", "cluster-mark-service-0.dat"):
        mark = MarkFile.decode((capture / f"node{node}" / name).read_bytes())
        assert len(mark.errors) == 1
        error = mark.errors[0]
        first, last = (_clustertool_time(t) for t in (error.first_observation_timestamp, error.last_observation_timestamp))
        assert f"{error.observation_count} observations from {first} to {last} for:\n{error.encoded_error}" in printed


def _clustertool_time(epoch_ms: int) -> str:
    """ClusterTool's `yyyy-MM-dd HH:mm:ss.SSSZ`, in UTC as the capture host was."""
    moment = datetime.datetime.fromtimestamp(epoch_ms / 1000, tz=datetime.UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S}.{epoch_ms % 1000:03d}+0000"


def test_the_real_consensus_module_and_container_mark_files_say_what_they_are(capture):
    cm = MarkFile.decode((capture / "node1" / "cluster-mark.dat").read_bytes())
    service = MarkFile.decode((capture / "node1" / "cluster-mark-service-0.dat").read_bytes())
    assert (cm.component_type_name, cm.header.member_id, cm.header.service_id) == ("CONSENSUS_MODULE", 1, -1)
    assert (service.component_type_name, service.header.service_id, service.header.ingress_stream_id) == ("CONTAINER", 0, -1)
    assert cm.file_length == 8192 + cm.header.error_buffer_length
