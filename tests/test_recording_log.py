"""recording.log: golden bytes from aeron-formats.md §4, Aeron's operations, and the real capture."""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats import recording_log as rl
from formats.errors import DecodeError
from formats.recording_log import Entry, EntryType, RecordingLog, RecordingLogError

# --- hand-written records (aeron-formats.md §4.1: 8×5 int64, serviceId int32, entryType int32, LE) ---

TERM_RECORD = bytes.fromhex(
    "0100000000000000"  # recordingId 1
    "0200000000000000"  # leadershipTermId 2
    "0001000000000000"  # termBaseLogPosition 256
    "ffffffffffffffff"  # logPosition -1 (open term)
    "0807060504030201"  # timestamp 0x0102030405060708
    "ffffffff"  # serviceId -1
    "00000000"  # entryType TERM
) + bytes(16)
INVALID_SNAPSHOT_RECORD = bytes.fromhex(
    "0700000000000000" "0200000000000000" "0001000000000000" "0002000000000000" "0900000000000000"
    "00000000"  # serviceId 0
    "01000080"  # SNAPSHOT with the invalid flag (bit 31)
) + bytes(16)
REMOVED_RECORD = bytes(44) + bytes.fromhex("ffffffff") + bytes(16)
STANDBY_RECORD = bytes.fromhex(
    "0800000000000000" "0200000000000000" "0001000000000000" "0002000000000000" "0900000000000000"
    "ffffffff"  # serviceId -1
    "02000000"  # STANDBY_SNAPSHOT
    "06000000"  # archiveEndpoint length 6, then ASCII
) + b"host:1" + bytes(6)


def test_a_term_record_decodes_field_by_field():
    log = RecordingLog.decode(TERM_RECORD)
    assert log.entries == (Entry(1, 2, 256, -1, 0x0102030405060708, -1, EntryType.TERM, True, 0, None),)
    assert log.entries[0].position == 0


def test_bit_31_of_the_entry_type_marks_an_entry_invalid():
    log = RecordingLog.decode(TERM_RECORD + INVALID_SNAPSHOT_RECORD)
    snapshot = log.file_entries[1]
    assert (snapshot.type, snapshot.is_valid, snapshot.service_id) == (EntryType.SNAPSHOT, False, 0)


def test_removed_records_are_skipped_but_use_up_an_entry_index():
    log = RecordingLog.decode(TERM_RECORD + REMOVED_RECORD + INVALID_SNAPSHOT_RECORD)
    assert [e.entry_index for e in log.file_entries] == [0, 2]
    assert log.removed_entry_indexes == (1,)
    assert log.next_entry_index == 3


def test_a_standby_snapshot_carries_its_archive_endpoint_and_an_aligned_length():
    log = RecordingLog.decode(STANDBY_RECORD + TERM_RECORD)
    standby, term = log.file_entries
    assert standby.archive_endpoint == "host:1"
    assert term.position == 64  # 48 + 4 + 6 bytes aligned to 64
    assert Entry(0, 0, 0, 0, 0, -1, EntryType.STANDBY_SNAPSHOT, archive_endpoint="x" * 12).length == 64
    assert Entry(0, 0, 0, 0, 0, -1, EntryType.STANDBY_SNAPSHOT, archive_endpoint="x" * 13).length == 128


def test_encoding_an_entry_gives_back_the_hand_written_record():
    entry = RecordingLog.decode(STANDBY_RECORD).entries[0]
    assert rl.encode_entry(entry) == STANDBY_RECORD
    assert rl.encode_entry(RecordingLog.decode(INVALID_SNAPSHOT_RECORD).entries[0]) == INVALID_SNAPSHOT_RECORD


def test_entry_to_string_is_aerons_own_test_expectation():
    entry = Entry(42, 5, 1024, 701, 1_000_000_000_000, 16, EntryType.SNAPSHOT, True, 2)
    assert str(entry) == (
        "Entry{recordingId=42, leadershipTermId=5, termBaseLogPosition=1024, logPosition=701, "
        "timestamp=1000000000000, serviceId=16, type=SNAPSHOT, isValid=true, entryIndex=2}"
    )


def test_only_standby_snapshots_print_an_archive_endpoint():
    standby = Entry(1, 0, 0, 5, 6, -1, EntryType.STANDBY_SNAPSHOT, False, 3, "a:1")
    assert str(standby).endswith("type=STANDBY_SNAPSHOT, isValid=false, entryIndex=3, archiveEndpoint=a:1}")


# --- the stop rule and damaged files ---


def test_up_to_48_trailing_bytes_are_ignored_by_aeron_but_refused_by_strict_decoding():
    data = TERM_RECORD + bytes(48)
    with pytest.raises(DecodeError, match=r"offset 64: file ends 48 byte\(s\) into a record"):
        RecordingLog.decode(data, source="r.log")
    lenient = RecordingLog.decode(data, strict=False)
    assert len(lenient.entries) == 1
    assert "48 byte(s)" in lenient.anomalies[0]


def test_a_record_cut_short_after_49_bytes_is_one_aeron_itself_cannot_load():
    data = TERM_RECORD + TERM_RECORD[:49]
    with pytest.raises(DecodeError, match="cut short: 49 of 64 bytes"):
        RecordingLog.decode(data)
    assert "Aeron refuses" in RecordingLog.decode(data, strict=False).anomalies[0]


def test_terms_with_different_recording_ids_are_refused_with_aerons_message():
    other = bytearray(TERM_RECORD)
    other[0] = 9
    other[8] = 3
    with pytest.raises(DecodeError, match="offset 64: invalid TERM recordingId=9, expected recordingId=1"):
        RecordingLog.decode(TERM_RECORD + bytes(other), source="x")


def test_an_entry_type_aeron_never_writes_is_refused_in_strict_mode_and_kept_in_lenient_mode():
    odd = bytearray(TERM_RECORD)
    odd[44] = 7
    with pytest.raises(DecodeError, match="entry type 7"):
        RecordingLog.decode(bytes(odd))
    assert RecordingLog.decode(bytes(odd), strict=False).entries[0].type_name == "UNKNOWN"


def test_a_zero_filled_file_is_not_taken_for_term_entries():
    with pytest.raises(DecodeError, match="TERM entry with serviceId 0"):
        RecordingLog.decode(bytes(4096))


def test_a_standby_snapshot_without_an_endpoint_is_refused():
    record = bytearray(STANDBY_RECORD)
    record[48:52] = bytes(4)
    with pytest.raises(DecodeError, match="Remote snapshots must has a valid endpoint"):
        RecordingLog.decode(bytes(record))


def test_an_empty_file_is_an_empty_log_as_aeron_creates_it():
    log = RecordingLog.decode(b"")
    assert log.entries == () and log.anomalies == () and rl.to_clustertool(log) == "RecordingLog{entries=[], cacheIndex={}}"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=700))
def test_arbitrary_bytes_decode_or_raise_decode_error_and_nothing_else(data):
    try:
        RecordingLog.decode(data)
    except DecodeError as error:
        assert "\n" not in str(error)
    RecordingLog.decode(data, strict=False)  # lenient decoding reads anything, as far as Aeron would


# --- the removed-standby misread (aeron-formats.md §4.2 edge case) ---


def _log_with_standby_between_terms(endpoint: str) -> RecordingLog:
    log = RecordingLog()
    log.append_term(5, 0, 0, 100)
    log.append_standby_snapshot(9, 0, 0, 50, 200, -1, endpoint)
    log.append_term(5, 1, 70, 300)
    return log


def test_removing_a_long_standby_snapshot_makes_aeron_misread_the_record_inside_it_and_we_say_so():
    log = _log_with_standby_between_terms("aeron:udp?endpoint=host-with-a-really-long-name.example.com:8010")
    log.remove_entry(0, 1)
    assert "misreads the 1 record(s) at offsets 128" in log.anomalies[0]
    assert "misread record" in log.anomalies[1]
    # Aeron reads a garbage UNKNOWN entry from the endpoint text, and the next TERM's entryIndex shifts.
    assert [e.type_name for e in log.file_entries] == ["TERM", "UNKNOWN", "TERM"]
    assert log.find_term_entry(1).entry_index == 3
    assert RecordingLog.decode(log.to_bytes()).anomalies == log.anomalies  # strict decoding tolerates it


def test_when_the_misread_record_looks_like_a_term_aeron_fails_and_so_do_we_naming_the_cause():
    log = _log_with_standby_between_terms("aeron:udp?endpoint=host-long:8010")
    with pytest.raises(RecordingLogError, match="misread from inside the removed STANDBY_SNAPSHOT at offset 64"):
        log.remove_entry(0, 1)


# --- sorting and the term index ---


def test_in_memory_order_is_term_then_base_then_term_standby_snapshot_and_services_descending():
    records = [
        Entry(3, 1, 100, 150, 0, 0, EntryType.SNAPSHOT, entry_index=0),
        Entry(3, 1, 100, 150, 0, -1, EntryType.SNAPSHOT, entry_index=1),
        Entry(3, 1, 100, 150, 0, 1, EntryType.SNAPSHOT, entry_index=2),
        Entry(8, 1, 100, 150, 0, -1, EntryType.STANDBY_SNAPSHOT, entry_index=3, archive_endpoint="b:1"),
        Entry(5, 1, 100, -1, 0, -1, EntryType.TERM, entry_index=4),
        Entry(5, 0, 0, 100, 0, -1, EntryType.TERM, entry_index=5),
        Entry(3, 1, 90, 95, 0, -1, EntryType.SNAPSHOT, entry_index=6),
    ]
    log = RecordingLog.from_entries(records)
    assert [e.entry_index for e in log.entries] == [5, 6, 4, 3, 2, 0, 1]


def _java_int_even_hash(value: int, mask: int) -> int:
    """Agrona Hashing.evenHash(int, int), for Int2IntHashMap (same map code as Long2LongHashMap)."""
    x = value & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x119DE1F3) & 0xFFFFFFFF
    x = (((x >> 16) ^ x) * 0x119DE1F3) & 0xFFFFFFFF
    x = ((x >> 16) ^ x) & 0xFFFFFFFF
    return (((x << 1) - (x << 8)) & 0xFFFFFFFF) & mask


def test_the_hash_map_emulation_prints_what_agronas_own_test_expects():
    # Int2IntHashMapTest.shouldGenerateStringRepresentation (Agrona 2.x): same probing, growth, iterator.
    index = rl._Long2LongHashMap(even_hash=_java_int_even_hash)
    for key in (3, 1, 19, 7, 11, 12, 7):
        index.put(key, key + 1000)
    assert str(index) == "{19=1019, 1=1001, 11=1011, 7=1007, 3=1003, 12=1012}"


def test_the_hash_map_emulation_survives_removals_that_compact_chains():
    index = rl._Long2LongHashMap()
    for key in range(40):
        index.put(key, key)
    for key in range(0, 40, 3):
        index.remove(key)
    assert sorted(index.items()) == [(k, k) for k in range(40) if k % 3]
    assert all(index.get(k) == (k if k % 3 else -1) for k in range(40))


def test_cache_index_follows_appends_that_insert_before_later_terms():
    log = RecordingLog()
    log.append_term(1, 5, 500, 0)
    log.append_term(1, 3, 300, 0)  # an earlier term after a later one: Aeron shifts the index values
    assert [e.leadership_term_id for e in log.entries] == [3, 5]
    assert dict(log.cache_index()) == {3: 0, 5: 1}
    assert log.get_term_entry(5).term_base_log_position == 500


# --- Aeron's operations ---


def test_append_term_commits_the_previous_term_at_the_new_base():
    log = RecordingLog()
    log.append_term(7, 0, 0, 10)
    log.append_term(7, 1, 4096, 20)
    assert log.get_term_entry(0).log_position == 4096
    assert log.get_term_entry(1).log_position == -1
    ops = [op for op, _ in log.take_changes()]
    assert ops == ["appendTerm", "commitLogPosition", "appendTerm"]
    assert log.take_changes() == []


def test_append_term_picks_up_the_next_terms_base_as_its_end():
    log = RecordingLog()
    log.append_term(7, 2, 800, 10)
    log.append_term(7, 1, 300, 5)
    assert log.get_term_entry(1).log_position == 800


def test_a_duplicate_term_is_refused_with_aerons_message():
    log = RecordingLog()
    log.append_term(7, 0, 0, 10)
    with pytest.raises(RecordingLogError, match="^duplicate TERM entry for leadershipTermId=0$"):
        log.append_term(7, 0, 0, 10)


def test_a_term_for_another_recording_is_refused():
    log = RecordingLog()
    log.append_term(7, 0, 0, 10)
    with pytest.raises(RecordingLogError, match="invalid TERM recordingId=8, expected recordingId=7"):
        log.append_term(8, 1, 0, 10)
    with pytest.raises(RecordingLogError, match="invalid recordingId=-1"):
        log.append_snapshot(-1, 0, 0, 0, 0, -1)


def test_appended_records_are_the_bytes_aeron_writes():
    log = RecordingLog()
    log.append_term(1, 2, 256, 0x0102030405060708)
    assert log.to_bytes() == TERM_RECORD
    log.append_standby_snapshot(8, 2, 256, 512, 9, -1, "host:1")
    assert log.to_bytes()[64:] == STANDBY_RECORD


def test_a_new_record_keeps_the_scratch_buffers_leftover_bytes_in_its_unused_tail():
    log = RecordingLog()
    log.append_standby_snapshot(8, 0, 0, 0, 0, -1, "a-rather-long-endpoint:9999")
    log.append_snapshot(9, 0, 0, 0, 0, -1)
    record = log.to_bytes()[128:192]
    assert record[48:64] == struct.pack("<i", 27) + b"a-rather-lon"  # as Aeron's reused buffer leaves it


def test_commit_log_position_on_an_unknown_term_is_refused_and_an_unchanged_one_writes_nothing():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.take_changes()
    with pytest.raises(RecordingLogError, match="^unknown leadershipTermId=4$"):
        log.commit_log_position(4, 10)
    log.commit_log_position(0, -1)
    assert log.take_changes() == []
    log.commit_log_position(0, 640)
    assert struct.unpack_from("<q", log.to_bytes(), 24)[0] == 640


def test_invalidating_a_term_sets_bit_31_and_drops_it_from_the_index():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.invalidate_entry(0)
    assert log.to_bytes()[44:48] == bytes.fromhex("00000080")
    assert log.find_term_entry(0) is None and log.find_last_term() is None
    assert RecordingLog.decode(log.to_bytes()).entries[0].is_valid is False
    with pytest.raises(RecordingLogError, match="Index 5 out of bounds for length 1"):
        log.invalidate_entry(5)


def test_a_snapshot_appended_again_revalidates_the_invalid_record_in_place():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.append_snapshot(2, 0, 0, 100, 5, -1)
    log.invalidate_entry(1)
    log.append_snapshot(3, 0, 0, 100, 6, -1)
    assert len(log.to_bytes()) == 128  # no new record
    snapshot = log.entries[1]
    assert (snapshot.recording_id, snapshot.timestamp, snapshot.is_valid, snapshot.entry_index) == (3, 6, True, 1)
    assert RecordingLog.decode(log.to_bytes()).entries == log.entries


def test_revalidating_a_standby_snapshot_fails_as_it_does_in_aeron_1_47_3():
    log = RecordingLog()
    log.append_standby_snapshot(2, 0, 0, 100, 5, -1, "h:1")
    log.invalidate_entry(0)
    before = log.to_bytes()
    with pytest.raises(RecordingLogError, match="Remote snapshots must has a valid endpoint"):
        log.append_standby_snapshot(3, 0, 0, 100, 6, -1, "h:1")
    assert log.to_bytes() == before


def test_standby_snapshot_endpoints_are_checked_like_aeron():
    log = RecordingLog()
    with pytest.raises(RecordingLogError, match="Remote snapshots must have a valid endpoint"):
        log.append_standby_snapshot(2, 0, 0, 100, 5, -1, "")
    with pytest.raises(RecordingLogError, match="Endpoint is too long: 4045 vs 4044"):
        log.append_standby_snapshot(2, 0, 0, 100, 5, -1, "x" * 4045)


def test_remove_entry_writes_minus_one_and_reloads():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.append_snapshot(2, 0, 0, 100, 5, -1)
    log.remove_entry(0, 1)
    assert log.to_bytes()[64 + 44 : 64 + 48] == b"\xff\xff\xff\xff"
    assert [e.entry_index for e in log.entries] == [0] and log.removed_entry_indexes == (1,)
    assert [op for op, _ in log.take_changes()][-1] == "removeEntry"
    with pytest.raises(RecordingLogError, match="unknown entry index: 7"):
        log.remove_entry(0, 7)


def test_invalidate_latest_snapshot_invalidates_the_consensus_module_and_its_service_snapshots():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    for position in (100, 200):
        log.append_snapshot(10 + position, 0, 0, position, 5, 1)
        log.append_snapshot(20 + position, 0, 0, position, 5, 0)
        log.append_snapshot(30 + position, 0, 0, position, 5, -1)
    assert log.invalidate_latest_snapshot() is True
    valid = {(e.log_position, e.service_id) for e in log.entries if e.type == EntryType.SNAPSHOT and e.is_valid}
    assert valid == {(100, 1), (100, 0), (100, -1)}
    assert log.get_latest_snapshot(-1).log_position == 100
    assert log.get_latest_snapshot(1).recording_id == 110


def test_invalidate_latest_snapshot_needs_a_matching_term():
    log = RecordingLog()
    log.append_snapshot(3, 4, 0, 100, 5, -1)
    with pytest.raises(RecordingLogError, match="no matching term for snapshot: leadershipTermId=4"):
        log.invalidate_latest_snapshot()


def test_latest_standby_snapshots_takes_the_newest_complete_set_per_endpoint():
    log = RecordingLog()
    for position, services in ((100, (0, -1)), (200, (-1,))):
        for service_id in services:
            log.append_standby_snapshot(1, 0, 0, position, 5, service_id, "a:1")
    log.append_standby_snapshot(1, 0, 0, 300, 5, 0, "b:1")
    log.append_standby_snapshot(1, 0, 0, 300, 5, -1, "b:1")
    latest = log.latest_standby_snapshots(1)
    assert list(latest) == ["a:1", "b:1"]
    assert {e.log_position for e in latest["a:1"]} == {100}


# --- ensureCoherent (aeron-election.md §3.10) ---


def test_ensure_coherent_on_an_empty_log_backfills_from_the_initial_term():
    log = RecordingLog()
    log.ensure_coherent(9, 1, 64, 3, 192, -1, 7)
    assert [(e.leadership_term_id, e.term_base_log_position, e.log_position) for e in log.entries] == [
        (1, 64, 64),
        (2, 64, 192),
        (3, 192, -1),
    ]


def test_ensure_coherent_never_backfills_a_term_minus_one():
    log = RecordingLog()
    log.ensure_coherent(9, -1, 0, 1, 0, 512, 7)
    assert [(e.leadership_term_id, e.log_position) for e in log.entries] == [(0, 0), (1, 512)]


def test_ensure_coherent_commits_an_open_last_term_then_fills_empty_terms():
    log = RecordingLog()
    log.append_term(9, 0, 0, 1)
    log.ensure_coherent(9, 0, 0, 3, 1000, -1, 7)
    assert [(e.leadership_term_id, e.term_base_log_position, e.log_position) for e in log.entries] == [
        (0, 0, 1000),
        (1, 1000, 1000),
        (2, 1000, 1000),
        (3, 1000, -1),
    ]


def test_ensure_coherent_refuses_when_the_prior_term_is_open_and_no_base_is_given():
    log = RecordingLog()
    log.append_term(9, 0, 0, 1)
    expected = (
        "Prior term was not committed: Entry{recordingId=9, leadershipTermId=0, termBaseLogPosition=0, "
        "logPosition=-1, timestamp=1, serviceId=-1, type=TERM, isValid=true, entryIndex=0} and "
        "logTermBasePosition was not specified: leadershipTermId = 2, logTermBasePosition = -1, "
        "logPosition = -1, nowNs = 55"
    )
    with pytest.raises(RecordingLogError, match=re.escape(expected)):
        log.ensure_coherent(9, 0, 0, 2, -1, -1, 7, now_ns=55)


def test_ensure_coherent_on_a_known_term_only_commits_the_position():
    log = RecordingLog()
    log.append_term(9, 0, 0, 1)
    log.append_term(9, 1, 50, 1)
    log.take_changes()
    log.ensure_coherent(9, 0, 0, 0, 0, 40, 7)
    assert [op for op, entry in log.take_changes()] == ["commitLogPosition"]
    assert log.get_term_entry(0).log_position == 40


# --- recovery plan, JSON ---


def test_a_recovery_plan_with_an_open_term_commits_at_the_snapshot_and_needs_a_service_snapshot():
    log = RecordingLog()
    log.append_term(1, 0, 0, 0)
    log.append_snapshot(2, 0, 0, 100, 5, -1)
    plan = log.recovery_plan_terms(0)
    assert plan.committed_log_position == 100  # the open term (-1) falls back to the snapshot's position
    assert plan.appended_log_position is None and plan.log_start_position == 100
    with pytest.raises(RecordingLogError, match="snapshot missing for service at index 2"):
        log.recovery_plan_terms(2)


def test_a_recovery_plan_from_snapshots_only_needs_no_archive():
    log = RecordingLog()
    log.append_snapshot(2, 3, 40, 100, 5, -1)
    plan = log.recovery_plan_terms(0)
    assert (plan.last_leadership_term_id, plan.last_term_base_log_position, plan.appended_log_position) == (3, 40, 100)
    assert plan.needs_archive == ()


def test_entry_json_has_exactly_the_contract_keys():
    term = Entry(1, 2, 3, 4, 5, -1, EntryType.TERM, True, 6)
    assert list(rl.entry_to_json(term)) == [
        "entryIndex", "recordingId", "leadershipTermId", "termBaseLogPosition", "logPosition", "timestamp",
        "serviceId", "type", "isValid",
    ]
    standby = Entry(1, 2, 3, 4, 5, -1, EntryType.STANDBY_SNAPSHOT, False, 6, "h:1")
    assert rl.entry_to_json(standby)["archiveEndpoint"] == "h:1"
    assert rl.entry_from_json(rl.entry_to_json(standby)) == standby


def test_entry_json_defaults_index_validity_service_and_type():
    entries = rl.entries_from_json(
        [{"recordingId": 1, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 9, "timestamp": 3}] * 2
    )
    assert entries[1] == Entry(1, 0, 0, 9, 3, -1, EntryType.TERM, True, 1)


@pytest.mark.parametrize(
    "document, message",
    [
        ({"leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 0, "timestamp": 0}, "missing 'recordingId'"),
        ({"recordingId": "1", "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 0, "timestamp": 0}, "integer"),
        ({"recordingId": 1, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 0, "timestamp": 0, "type": "X"}, "TERM, SNAPSHOT"),
        ({"recordingId": 1, "leadershipTermId": 0, "termBaseLogPosition": 0, "logPosition": 0, "timestamp": 0, "type": "STANDBY_SNAPSHOT"}, "archiveEndpoint"),
        ([1, 2], "JSON object"),
    ],
)
def test_bad_entry_json_raises_decode_error(document, message):
    with pytest.raises(DecodeError, match=message):
        rl.entry_from_json(document)


@st.composite
def _files_of_entries(draw):
    """Entries of every type as Aeron could have written them, placed at entryIndexes with gaps
    (removed records) in between."""
    term_recording_id = draw(st.integers(0, 2**40))
    placed = []
    index = 0
    for _ in range(draw(st.integers(0, 12))):
        index += draw(st.integers(0, 2))
        entry_type = draw(st.sampled_from(list(EntryType)))
        is_term = entry_type == EntryType.TERM
        placed.append(
            Entry(
                recording_id=term_recording_id if is_term else draw(st.integers(0, 2**40)),
                leadership_term_id=draw(st.integers(0, 50)),
                term_base_log_position=draw(st.integers(0, 2**50)),
                log_position=draw(st.integers(-1, 2**50)),
                timestamp=draw(st.integers(-(2**63), 2**63 - 1)),
                service_id=-1 if is_term else draw(st.integers(-1, 5)),
                type=entry_type,
                is_valid=draw(st.booleans()),
                entry_index=index,
                archive_endpoint=(
                    draw(st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=90))
                    if entry_type == EntryType.STANDBY_SNAPSHOT
                    else None
                ),
            )
        )
        index += 1
    return placed


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files_of_entries())
def test_any_entries_aeron_could_write_round_trip_through_the_file(placed):
    log = RecordingLog.from_entries(placed)
    assert list(log.file_entries) == placed
    again = RecordingLog.decode(log.to_bytes())
    assert again.entries == log.entries and again.to_bytes() == log.to_bytes()
    assert [rl.entry_from_json(rl.entry_to_json(e)) for e in log.entries] == list(log.entries)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_files_of_entries(), st.data())
def test_a_file_cut_anywhere_decodes_or_raises_decode_error(placed, data):
    full = RecordingLog.from_entries(placed)
    whole = full.to_bytes()
    cut = data.draw(st.integers(0, len(whole)))
    try:
        log = RecordingLog.decode(whole[:cut])
    except DecodeError as error:
        assert error.offset is not None and error.offset <= cut
        return
    # Only a cut between records decodes, and then to exactly the records before the cut.
    assert list(log.file_entries) == [e for e in full.file_entries if e.position + e.length <= cut]
    assert all(e.position + e.length <= cut for e in log.file_entries)


# --- the real Aeron 1.47.3 files ---


@pytest.mark.parametrize("node", [0, 1, 2])
def test_clustertool_output_of_the_real_files_is_byte_for_byte_aerons(capture, node):
    data = (capture / f"node{node}" / "recording.log").read_bytes()
    log = RecordingLog.decode(data, source="recording.log")
    printed = (capture / f"node{node}" / "clustertool" / "recording-log.txt").read_text().splitlines()[1]
    assert rl.to_clustertool(log) == printed
    assert log.to_bytes() == data and log.anomalies == ()


@pytest.mark.parametrize("node", [0, 1, 2])
def test_the_recovery_plan_of_the_real_files_agrees_with_clustertool(capture, node):
    log = RecordingLog.decode((capture / f"node{node}" / "recording.log").read_bytes())
    printed = (capture / f"node{node}" / "clustertool" / "recovery-plan_1.txt").read_text().splitlines()[1]
    plan = log.recovery_plan_terms(1)
    assert f"lastLeadershipTermId={plan.last_leadership_term_id}," in printed
    assert f"lastTermBaseLogPosition={plan.last_term_base_log_position}," in printed
    assert f"committedLogPosition={plan.committed_log_position}," in printed
    assert f"snapshots=[{', '.join(str(s) for s in plan.snapshots)}]" in printed
    assert f"startPosition={plan.log_start_position}," in printed
