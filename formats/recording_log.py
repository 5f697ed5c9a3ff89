"""`recording.log`: Aeron Cluster's history of leadership terms and snapshots, byte for byte.

Theory of operation.  The file is not SBE: it is a run of little-endian records, each aligned to 64
bytes (aeron-formats.md §4).  `RecordingLog` is an in-memory model of the *file*: it holds the file's
bytes and mirrors `io.aeron.cluster.RecordingLog` (Aeron 1.47.3) operation by operation, so that what
it reads, the order it keeps, the errors it raises and the bytes it writes are Aeron's:

* `decode` repeats Aeron's `reload`: the file is read in 4 KiB chunks through one reused scratch
  buffer, records are captured while more than 48 bytes remain, removed records (entry type −1) are
  skipped but still use up an entryIndex, and the entries are then sorted with `ENTRY_COMPARATOR`.
* The term index is an emulation of Agrona's `Long2LongHashMap` (open addressing, linear probing,
  `Hashing.evenHash`), because ClusterTool prints it in its hash order (`to_clustertool`).
* Every write goes through the same 4 KiB scratch buffer as in Aeron, so the unused tail bytes of a
  new 64-byte record are whatever Aeron would leave there.
* Aeron's quirks are kept, and the ones that damage data are *detected*: a removed STANDBY_SNAPSHOT
  record longer than 64 bytes makes Aeron (and us) read the following records from inside it.  Such
  findings are kept in `anomalies`.

Bad input raises `DecodeError` (the file is not a recording.log Aeron could load or would write;
`strict=False` records those findings as anomalies instead and reads on as Aeron does).  Aeron's own
refusals of an *operation* (a duplicate TERM, an unknown leadershipTermId, ...) raise
`RecordingLogError` with Aeron's message text.  Every mutation is logged for the engine's trace:
`take_changes()` returns `(op, entry-json)` pairs, op being the Aeron method that wrote the bytes.

No I/O here: callers read the file and write `to_bytes()` back.
"""

from __future__ import annotations

import enum
import functools
import struct
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from formats.errors import DecodeError

RECORD_ALIGNMENT = 64
ENDPOINT_OFFSET = 48
ENTRY_TYPE_OFFSET = 44
LOG_POSITION_OFFSET = 24
MAX_ENTRY_LENGTH = 4096
MAX_ENDPOINT_LENGTH = MAX_ENTRY_LENGTH - ENDPOINT_OFFSET - 4
ENTRY_TYPE_INVALID_FLAG = 0x8000_0000
REMOVED_ENTRY_TYPE = -1
#: Aeron's NULL_VALUE / NULL_POSITION: "none" for ids and positions, a removed record's type.
NULL_VALUE = -1
#: `ConsensusModule.Configuration.SERVICE_ID`: the consensus module's own snapshots.
CONSENSUS_MODULE_SERVICE_ID = -1

_FIELDS = struct.Struct("<qqqqqii")  # recordingId .. entryType: the 48 fixed bytes of every record
_INT32 = struct.Struct("<i")
_INT64 = struct.Struct("<q")
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


class EntryType(enum.IntEnum):
    TERM = 0
    SNAPSHOT = 1
    STANDBY_SNAPSHOT = 2


class RecordingLogError(ValueError):
    """Aeron refuses the operation (a `ClusterException` in Aeron); the message is Aeron's."""


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) & ~(alignment - 1)


def _as_type(masked: int) -> EntryType | int:
    try:
        return EntryType(masked)
    except ValueError:
        return masked  # a type Aeron never writes; Aeron prints it as UNKNOWN


def type_name(entry_type: EntryType | int) -> str:
    """Aeron's `RecordingLog.typeAsString`."""
    return EntryType(entry_type).name if entry_type in (0, 1, 2) else "UNKNOWN"


@dataclass(frozen=True, slots=True)
class Entry:
    """One record of the file, as Aeron's `RecordingLog.Entry` holds it.

    `type` is the entry type without the invalid flag (bit 31), which is `is_valid`.  `entry_index` is
    the ordinal of the record in the file, counting removed records.  `position` is the record's
    file offset (−1 until written); it is not part of the value, as in Aeron's `equals`.
    """

    recording_id: int
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    timestamp: int
    service_id: int
    type: EntryType | int
    is_valid: bool = True
    entry_index: int = 0
    archive_endpoint: str | None = None
    position: int = field(default=NULL_VALUE, compare=False, repr=False)

    @property
    def type_name(self) -> str:
        return type_name(self.type)

    @property
    def length(self) -> int:
        """Bytes the record takes on disk (Aeron's `Entry.length()`)."""
        if self.type == EntryType.STANDBY_SNAPSHOT:
            return _align(ENDPOINT_OFFSET + 4 + len(self.archive_endpoint or ""), RECORD_ALIGNMENT)
        return _align(ENDPOINT_OFFSET, RECORD_ALIGNMENT)

    def __str__(self) -> str:
        """Exactly Aeron's `Entry.toString()` (what ClusterTool prints)."""
        endpoint = (
            f", archiveEndpoint={_java_string(self.archive_endpoint)}"
            if self.type == EntryType.STANDBY_SNAPSHOT
            else ""
        )
        return (
            f"Entry{{recordingId={self.recording_id}, leadershipTermId={self.leadership_term_id}, "
            f"termBaseLogPosition={self.term_base_log_position}, logPosition={self.log_position}, "
            f"timestamp={self.timestamp}, serviceId={self.service_id}, type={self.type_name}, "
            f"isValid={_java_bool(self.is_valid)}, entryIndex={self.entry_index}{endpoint}}}"
        )


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Aeron's `RecordingLog.Snapshot`: one step of a recovery plan."""

    recording_id: int
    leadership_term_id: int
    term_base_log_position: int
    log_position: int
    timestamp: int
    service_id: int

    def __str__(self) -> str:
        return (
            f"Snapshot{{recordingId={self.recording_id}, leadershipTermId={self.leadership_term_id}, "
            f"termBaseLogPosition={self.term_base_log_position}, logPosition={self.log_position}, "
            f"timestamp={self.timestamp}, serviceId={self.service_id}}}"
        )


@dataclass(frozen=True, slots=True)
class RecoveryPlanView:
    """What `createRecoveryPlan(archive, serviceCount, NULL_VALUE)` decides from the log alone.

    Values that Aeron takes from the archive's recording descriptor are None here, and
    `needs_archive` says which they are and why.
    """

    last_leadership_term_id: int
    last_term_base_log_position: int
    committed_log_position: int
    appended_log_position: int | None
    snapshots: tuple[Snapshot, ...]
    log_entry: Entry | None
    log_start_position: int | None
    needs_archive: tuple[str, ...]


def _java_bool(value: bool) -> str:
    return "true" if value else "false"


def _java_string(value: str | None) -> str:
    return "null" if value is None else value


def _compare(e1: Entry, e2: Entry) -> int:
    """Aeron 1.47.3 `ENTRY_COMPARATOR`, verbatim."""
    if e1.leadership_term_id != e2.leadership_term_id:
        return -1 if e1.leadership_term_id < e2.leadership_term_id else 1
    if e1.term_base_log_position != e2.term_base_log_position:
        return -1 if e1.term_base_log_position < e2.term_base_log_position else 1
    if e1.type != e2.type:
        if e1.type == EntryType.SNAPSHOT:
            return 1
        if e2.type == EntryType.SNAPSHOT:
            return -1
        return -1 if e1.type < e2.type else 1
    if e1.type == EntryType.TERM:
        return (e1.entry_index > e2.entry_index) - (e1.entry_index < e2.entry_index)
    if e1.log_position != e2.log_position:
        return -1 if e1.log_position < e2.log_position else 1
    return (e2.service_id > e1.service_id) - (e2.service_id < e1.service_id)  # serviceId descending


ENTRY_SORT_KEY = functools.cmp_to_key(_compare)

# ---------------------------------------------------------------------------------------------------
# Agrona Long2LongHashMap, as far as the recording log's term index uses it.
# ---------------------------------------------------------------------------------------------------

_MASK32 = (1 << 32) - 1
_MASK64 = (1 << 64) - 1
_LOAD_FACTOR = 0.550000011920929  # Hashing.DEFAULT_LOAD_FACTOR is the float 0.55f


def agrona_even_hash(value: int, mask: int) -> int:
    """Agrona `Hashing.evenHash(long, int)`: a 64-bit mixer folded to 32 bits, made even, masked."""
    x = value & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    x ^= x >> 31
    folded = (x & _MASK32) ^ (x >> 32)
    return (((folded << 1) - (folded << 8)) & _MASK32) & mask


class _Long2LongHashMap:
    """Agrona's `Long2LongHashMap` (keys and values interleaved in one array), missing value −1.

    Only the behaviour that decides iteration order is reproduced: put, get, remove with chain
    compaction, growth by rehash, and the iterator that `toString` uses.
    """

    def __init__(self, missing_value: int = NULL_VALUE, even_hash: Callable[[int, int], int] | None = None) -> None:
        self._missing = missing_value
        # Long2LongHashMap uses Hashing.evenHash(long); Int2IntHashMap (same code, int keys) lets tests
        # check this emulation against Agrona's own published toString expectations.
        self._hash = even_hash or agrona_even_hash
        self._size = 0
        self._set_capacity(8)

    def _set_capacity(self, capacity: int) -> None:
        self._resize_threshold = int(capacity * _LOAD_FACTOR)
        self._entries = [self._missing] * (capacity * 2)

    def __len__(self) -> int:
        return self._size

    def get(self, key: int) -> int:
        entries, missing = self._entries, self._missing
        mask = len(entries) - 1
        index = self._hash(key, mask)
        while (value := entries[index + 1]) != missing:
            if entries[index] == key:
                break
            index = (index + 2) & mask
        return value

    def contains_key(self, key: int) -> bool:
        return self.get(key) != self._missing

    def put(self, key: int, value: int) -> None:
        entries, missing = self._entries, self._missing
        mask = len(entries) - 1
        index = self._hash(key, mask)
        while (old := entries[index + 1]) != missing:
            if entries[index] == key:
                break
            index = (index + 2) & mask
        if old == missing:
            self._size += 1
            entries[index] = key
        entries[index + 1] = value
        if self._size > self._resize_threshold:
            self._rehash(len(entries))

    def _rehash(self, new_capacity: int) -> None:
        old, missing = self._entries, self._missing
        self._set_capacity(new_capacity)
        entries = self._entries
        mask = len(entries) - 1
        for value_index in range(1, len(old), 2):
            value = old[value_index]
            if value != missing:
                key = old[value_index - 1]
                index = self._hash(key, mask)
                while entries[index + 1] != missing:
                    index = (index + 2) & mask
                entries[index] = key
                entries[index + 1] = value

    def remove(self, key: int) -> int:
        entries, missing = self._entries, self._missing
        mask = len(entries) - 1
        index = self._hash(key, mask)
        while (old := entries[index + 1]) != missing:
            if entries[index] == key:
                entries[index + 1] = missing
                self._size -= 1
                self._compact_chain(index)
                break
            index = (index + 2) & mask
        return old

    def _compact_chain(self, delete_index: int) -> None:
        entries, missing = self._entries, self._missing
        mask = len(entries) - 1
        index = delete_index
        while True:
            index = (index + 2) & mask
            value = entries[index + 1]
            if value == missing:
                break
            key = entries[index]
            hash_index = self._hash(key, mask)
            if (index < hash_index and (hash_index <= delete_index or delete_index <= index)) or (
                hash_index <= delete_index <= index
            ):
                entries[delete_index] = key
                entries[delete_index + 1] = value
                entries[index + 1] = missing
                delete_index = index

    def _slots(self) -> list[int]:
        """Key slot indexes in the order of Agrona's `AbstractIterator` (reset + findNext)."""
        entries, missing = self._entries, self._missing
        length = len(entries)
        mask = length - 1
        stop = length
        if entries[length - 1] != missing:
            for i in range(1, length, 2):
                if entries[i] == missing:
                    stop = i - 1
                    break
        slots = []
        for key_index in range(stop + length - 2, stop - 1, -2):
            index = key_index & mask
            if entries[index + 1] != missing:
                slots.append(index)
                if len(slots) == self._size:
                    break
        return slots

    def items(self) -> list[tuple[int, int]]:
        return [(self._entries[i], self._entries[i + 1]) for i in self._slots()]

    def increment_values_of_keys_above(self, key: int) -> None:
        """The `append` loop: entryIterator.setValue(value + 1) for every key > `key`."""
        for index in self._slots():
            if self._entries[index] > key:
                self._entries[index + 1] += 1

    def __str__(self) -> str:
        if self._size == 0:
            return "{}"
        return "{" + ", ".join(f"{k}={v}" for k, v in self.items()) + "}"


# ---------------------------------------------------------------------------------------------------
# The file model.
# ---------------------------------------------------------------------------------------------------


class _Refusal(Exception):
    """Internal: Aeron itself would throw while loading (carries the file offset)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


class RecordingLog:
    """The whole `recording.log` file in memory, with Aeron's operations on it."""

    def __init__(self) -> None:
        """An empty log: what Aeron creates (a zero-length file) before the first append."""
        self._source: str | None = None
        self._file = bytearray()
        self._scratch = bytearray(MAX_ENTRY_LENGTH)
        self._entries: list[Entry] = []
        self._index = _Long2LongHashMap()
        self._invalid_snapshots: list[int] = []
        self._term_recording_id = NULL_VALUE
        self._next_entry_index = 0
        self._removed: list[tuple[int, int]] = []
        self._anomalies: list[str] = []
        self._misread_spans: list[tuple[int, int]] = []
        self._changes: list[tuple[str, dict[str, Any]]] = []
        self._mode = "strict"
        self._stopped = False

    # -- construction --------------------------------------------------------------------------------

    @classmethod
    def decode(
        cls, data: bytes | bytearray | memoryview, *, source: str | None = None, strict: bool = True
    ) -> RecordingLog:
        """Load a file as Aeron's `reload` does.

        With `strict` (the default) a file that Aeron could not load, or that Aeron could not have
        written, raises `DecodeError` naming the record's offset.  With `strict=False` those findings
        go to `anomalies` and reading goes on as far as Aeron's own reader would.
        """
        log = cls()
        log._source = source
        log._file = bytearray(data)
        log._reload(mode="strict" if strict else "lenient")
        return log

    @classmethod
    def from_entries(cls, entries: Iterable[Entry], *, source: str | None = None) -> RecordingLog:
        """Write entries into a file at their entryIndex (gaps become removed records) and load it."""
        by_index: dict[int, Entry] = {}
        for entry in entries:
            if entry.entry_index < 0:
                raise DecodeError(f"entryIndex {entry.entry_index} is negative", source=source)
            if entry.entry_index in by_index:
                raise DecodeError(f"two entries with entryIndex {entry.entry_index}", source=source)
            by_index[entry.entry_index] = entry
        data = bytearray()
        for index in range(max(by_index, default=-1) + 1):
            entry = by_index.get(index)
            data += encode_entry(entry) if entry is not None else _removed_record()
        return cls.decode(bytes(data), source=source or "<entries>")

    # -- views ----------------------------------------------------------------------------------------

    @property
    def source(self) -> str | None:
        return self._source

    @property
    def entries(self) -> tuple[Entry, ...]:
        """Aeron's `entries()`: the in-memory list, sorted by ENTRY_COMPARATOR at load."""
        return tuple(self._entries)

    @property
    def file_entries(self) -> tuple[Entry, ...]:
        """The entries in file order (by entryIndex), removed records left out."""
        return tuple(sorted(self._entries, key=lambda e: e.entry_index))

    @property
    def removed_entry_indexes(self) -> tuple[int, ...]:
        """entryIndex of every removed (type −1) record seen at the last load."""
        return tuple(index for index, _ in self._removed)

    @property
    def next_entry_index(self) -> int:
        return self._next_entry_index

    @property
    def anomalies(self) -> tuple[str, ...]:
        """What is odd about the file although Aeron loads it (or, lenient, what Aeron refuses)."""
        return tuple(self._anomalies)

    def cache_index(self) -> list[tuple[int, int]]:
        """The term index (leadershipTermId → list index) in Agrona's iteration order."""
        return self._index.items()

    def to_bytes(self) -> bytes:
        return bytes(self._file)

    def take_changes(self) -> list[tuple[str, dict[str, Any]]]:
        """(op, entry-json) for each write since the last call, in the order Aeron writes them."""
        changes, self._changes = self._changes, []
        return changes

    def __str__(self) -> str:
        return to_clustertool(self)

    # -- queries (Aeron's names) ----------------------------------------------------------------------

    def find_last_term(self) -> Entry | None:
        for entry in reversed(self._entries):
            if _is_valid_term(entry):
                return entry
        return None

    def find_last_term_recording_id(self) -> int:
        last = self.find_last_term()
        return last.recording_id if last is not None else NULL_VALUE

    def find_term_entry(self, leadership_term_id: int) -> Entry | None:
        index = self._index.get(leadership_term_id)
        return self._entries[index] if index != NULL_VALUE else None

    def get_term_entry(self, leadership_term_id: int) -> Entry:
        entry = self.find_term_entry(leadership_term_id)
        if entry is None:
            raise RecordingLogError(f"unknown leadershipTermId={leadership_term_id}")
        return entry

    def is_unknown(self, leadership_term_id: int) -> bool:
        return not self._index.contains_key(leadership_term_id)

    def get_term_timestamp(self, leadership_term_id: int) -> int:
        entry = self.find_term_entry(leadership_term_id)
        return entry.timestamp if entry is not None else NULL_VALUE

    def get_latest_snapshot(self, service_id: int) -> Entry | None:
        entries = self._entries
        for i in range(len(entries) - 1, -1, -1):
            entry = entries[i]
            if _is_valid_snapshot(entry) and entry.service_id == CONSENSUS_MODULE_SERVICE_ID:
                if service_id == CONSENSUS_MODULE_SERVICE_ID:
                    return entry
                service_index = i - (service_id + 1)
                if service_index >= 0:
                    snapshot = entries[service_index]
                    if _is_valid_snapshot(snapshot) and snapshot.service_id == service_id:
                        return snapshot
        return None

    def latest_standby_snapshots(self, service_count: int) -> dict[str, list[Entry]]:
        """Per archive endpoint, the newest complete set (serviceCount + 1) of standby snapshots.

        Aeron returns a hash map; here the endpoints are sorted so that output is deterministic.
        """
        by_endpoint: dict[str, dict[int, list[Entry]]] = {}
        for entry in reversed(self._entries):
            if entry.type == EntryType.STANDBY_SNAPSHOT and entry.is_valid:
                by_endpoint.setdefault(entry.archive_endpoint or "", {}).setdefault(
                    entry.log_position, []
                ).append(entry)
        latest: dict[str, list[Entry]] = {}
        for endpoint in sorted(by_endpoint):
            by_position = by_endpoint[endpoint]
            for log_position in sorted(by_position, reverse=True):
                if len(by_position[log_position]) == service_count + 1:
                    latest[endpoint] = by_position[log_position]
                    break
        return latest

    def recovery_plan_terms(self, service_count: int) -> RecoveryPlanView:
        """Aeron's `createRecoveryPlan` as far as it can be decided without an archive."""
        entries = self._entries
        snapshots: list[Snapshot] = []
        log_index = snapshot_index = -1
        for i in range(len(entries) - 1, -1, -1):  # Aeron's scan, including its else-if chain
            entry = entries[i]
            if (
                snapshot_index == -1
                and _is_valid_snapshot(entry)
                and entry.service_id == CONSENSUS_MODULE_SERVICE_ID
            ):
                snapshot_index = i
            elif log_index == -1 and _is_valid_term(entry) and entry.recording_id != NULL_VALUE:
                log_index = i
            elif snapshot_index != -1 and log_index != -1:
                break
        if snapshot_index != -1:
            snapshots = _add_snapshots(entries, service_count, snapshot_index)

        last_term_id, last_base, committed, appended = NULL_VALUE, 0, 0, 0
        if snapshots:
            first = snapshots[0]
            last_term_id, last_base = first.leadership_term_id, first.term_base_log_position
            appended = committed = first.log_position
        needs: list[str] = []
        log_entry = entries[log_index] if log_index != -1 else None
        appended_or_none: int | None = appended
        start: int | None = None
        if log_entry is not None:
            last_term_id, last_base = log_entry.leadership_term_id, log_entry.term_base_log_position
            if log_entry.log_position != NULL_VALUE:
                committed = log_entry.log_position
            appended_or_none = None
            needs.append(
                f"appendedLogPosition: the stop position of log recording {log_entry.recording_id}"
            )
            if snapshots:
                start = snapshots[0].log_position
            else:
                needs.append(f"log.startPosition: the start position of recording {log_entry.recording_id}")
            needs.append("log.initialTermId, termBufferLength, mtuLength, sessionId: the recording descriptor")
        return RecoveryPlanView(
            last_leadership_term_id=last_term_id,
            last_term_base_log_position=last_base,
            committed_log_position=committed,
            appended_log_position=appended_or_none,
            snapshots=tuple(snapshots),
            log_entry=log_entry,
            log_start_position=start,
            needs_archive=tuple(needs),
        )

    # -- mutations (Aeron's names and rules) ----------------------------------------------------------

    def append_term(
        self, recording_id: int, leadership_term_id: int, term_base_log_position: int, timestamp: int
    ) -> None:
        self._validate_term_recording_id(recording_id)
        log_position = NULL_VALUE
        if self._entries:
            if self._index.contains_key(leadership_term_id):
                raise RecordingLogError(f"duplicate TERM entry for leadershipTermId={leadership_term_id}")
            if self._index.contains_key(leadership_term_id - 1):
                self.commit_log_position(leadership_term_id - 1, term_base_log_position)
            next_term = self.find_term_entry(leadership_term_id + 1)
            if next_term is not None:
                log_position = next_term.term_base_log_position
        index = self._append(
            "appendTerm",
            EntryType.TERM,
            recording_id,
            leadership_term_id,
            term_base_log_position,
            log_position,
            timestamp,
            NULL_VALUE,
            None,
        )
        self._index.put(leadership_term_id, index)

    def append_snapshot(
        self,
        recording_id: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        timestamp: int,
        service_id: int,
    ) -> None:
        _validate_recording_id(recording_id)
        args = (recording_id, leadership_term_id, term_base_log_position, log_position, timestamp, service_id)
        if not self._restore_invalid_snapshot(EntryType.SNAPSHOT, *args):
            self._append("appendSnapshot", EntryType.SNAPSHOT, *args, None)

    def append_standby_snapshot(
        self,
        recording_id: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        timestamp: int,
        service_id: int,
        archive_endpoint: str,
    ) -> None:
        _validate_recording_id(recording_id)
        if not archive_endpoint:
            raise RecordingLogError("Remote snapshots must have a valid endpoint")
        if len(archive_endpoint) > MAX_ENDPOINT_LENGTH:
            raise RecordingLogError(
                f"Endpoint is too long: {len(archive_endpoint)} vs {MAX_ENDPOINT_LENGTH}"
            )
        args = (recording_id, leadership_term_id, term_base_log_position, log_position, timestamp, service_id)
        if not self._restore_invalid_snapshot(EntryType.STANDBY_SNAPSHOT, *args):
            self._append("appendStandbySnapshot", EntryType.STANDBY_SNAPSHOT, *args, archive_endpoint)

    def commit_log_position(self, leadership_term_id: int, log_position: int) -> None:
        index = self._index.get(leadership_term_id)
        if index == NULL_VALUE:
            raise RecordingLogError(f"unknown leadershipTermId={leadership_term_id}")
        entry = self._entries[index]
        if entry.log_position != log_position:
            _INT64.pack_into(self._scratch, 0, log_position)
            self._persist(entry.position + LOG_POSITION_OFFSET, 8)
            updated = replace(entry, log_position=log_position)
            self._entries[index] = updated
            self._changes.append(("commitLogPosition", entry_to_json(updated)))

    def invalidate_entry(self, index: int) -> None:
        """Aeron 1.47.3 `invalidateEntry(int index)`: `index` is the position in `entries`."""
        if not 0 <= index < len(self._entries):
            raise RecordingLogError(f"Index {index} out of bounds for length {len(self._entries)}")
        invalid = replace(self._entries[index], is_valid=False)
        self._entries[index] = invalid
        if invalid.type == EntryType.TERM:
            self._index.remove(invalid.leadership_term_id)
        elif invalid.type in (EntryType.SNAPSHOT, EntryType.STANDBY_SNAPSHOT):
            self._invalid_snapshots.append(index)
        _INT32.pack_into(self._scratch, 0, _signed32(ENTRY_TYPE_INVALID_FLAG | int(invalid.type)))
        self._persist(invalid.position + ENTRY_TYPE_OFFSET, 4)
        self._changes.append(("invalidateEntry", entry_to_json(invalid)))

    def remove_entry(self, leadership_term_id: int, entry_index: int) -> None:
        """Mark the record removed (entry type −1) and reload, as Aeron's `removeEntry` does."""
        target = None
        for entry in reversed(self._entries):
            if entry.leadership_term_id == leadership_term_id and entry.entry_index == entry_index:
                target = entry
                break
        if target is None:
            raise RecordingLogError(f"unknown entry index: {entry_index}")
        _INT32.pack_into(self._scratch, 0, REMOVED_ENTRY_TYPE)
        self._persist(target.position + ENTRY_TYPE_OFFSET, 4)
        self._changes.append(("removeEntry", entry_to_json(target)))
        self._reload(mode="mutation")

    def invalidate_latest_snapshot(self) -> bool:
        """ClusterTool `invalidate-latest-snapshot`: invalidate the newest full set of snapshots."""
        indices: list[int] = []
        high_log_position = NULL_VALUE
        for i in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[i]
            if _is_valid_any_snapshot(entry) and entry.service_id == CONSENSUS_MODULE_SERVICE_ID:
                if entry.log_position >= high_log_position:
                    if not self._index.contains_key(entry.leadership_term_id):
                        raise RecordingLogError(
                            f"no matching term for snapshot: leadershipTermId={entry.leadership_term_id}"
                        )
                    if entry.log_position > high_log_position:
                        indices.clear()
                        high_log_position = entry.log_position
                    indices.append(i)
                else:
                    break  # an earlier snapshot: Aeron stops searching
        found = bool(indices)
        while indices:
            service_id = CONSENSUS_MODULE_SERVICE_ID
            for i in range(indices.pop(), -1, -1):
                entry = self._entries[i]
                if _is_valid_any_snapshot(entry) and entry.service_id == service_id:
                    self.invalidate_entry(i)
                    service_id += 1
                else:
                    break
        return found

    def ensure_coherent(
        self,
        recording_id: int,
        initial_log_leadership_term_id: int,
        initial_term_base_log_position: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        timestamp: int,
        *,
        now_ns: int = 0,
    ) -> None:
        """Aeron's `ensureCoherent` (aeron-election.md §3.10); `now_ns` only appears in its error text.

        The caller (`Election.ensureRecordingLogCoherent`) has already returned early when the log
        recording id is −1 and substituted the initial term base for an unknown (−1) one.
        """
        last_term = self.find_last_term()
        if last_term is None:
            for term_id in range(max(0, initial_log_leadership_term_id), leadership_term_id):
                self.append_term(recording_id, term_id, initial_term_base_log_position, timestamp)
            self.append_term(recording_id, leadership_term_id, term_base_log_position, timestamp)
            if log_position != NULL_VALUE:
                self.commit_log_position(leadership_term_id, log_position)
        elif last_term.leadership_term_id < leadership_term_id:
            if last_term.log_position == NULL_VALUE:
                if term_base_log_position == NULL_VALUE:
                    raise RecordingLogError(
                        f"Prior term was not committed: {last_term} and logTermBasePosition was not "
                        f"specified: leadershipTermId = {leadership_term_id}, logTermBasePosition = "
                        f"{term_base_log_position}, logPosition = {log_position}, nowNs = {now_ns}"
                    )
                self.commit_log_position(last_term.leadership_term_id, term_base_log_position)
                last_term = self.find_last_term()
                assert last_term is not None
            for term_id in range(last_term.leadership_term_id + 1, leadership_term_id):
                self.append_term(recording_id, term_id, last_term.log_position, timestamp)
            self.append_term(recording_id, leadership_term_id, last_term.log_position, timestamp)
            if log_position != NULL_VALUE:
                self.commit_log_position(leadership_term_id, log_position)
        elif log_position != NULL_VALUE:
            self.commit_log_position(leadership_term_id, log_position)

    # -- internals --------------------------------------------------------------------------------------

    def _validate_term_recording_id(self, recording_id: int) -> None:
        _validate_recording_id(recording_id)
        if recording_id != self._term_recording_id:
            if self._term_recording_id == NULL_VALUE:
                self._term_recording_id = recording_id
            else:
                raise RecordingLogError(
                    f"invalid TERM recordingId={recording_id}, expected recordingId={self._term_recording_id}"
                )

    def _restore_invalid_snapshot(
        self,
        entry_type: EntryType,
        recording_id: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        timestamp: int,
        service_id: int,
    ) -> bool:
        for i in range(len(self._invalid_snapshots) - 1, -1, -1):
            cache_index = self._invalid_snapshots[i]
            entry = self._entries[cache_index]
            if (
                entry.type == entry_type
                and entry.leadership_term_id == leadership_term_id
                and entry.term_base_log_position == term_base_log_position
                and entry.log_position == log_position
                and entry.service_id == service_id
            ):
                if entry_type == EntryType.STANDBY_SNAPSHOT:
                    # Aeron builds the re-validated entry without an endpoint; its constructor throws
                    # before anything is written (aeron-formats.md §4.3).
                    raise RecordingLogError("Remote snapshots must has a valid endpoint")
                validated = Entry(
                    recording_id,
                    leadership_term_id,
                    term_base_log_position,
                    log_position,
                    timestamp,
                    service_id,
                    entry_type,
                    True,
                    entry.entry_index,
                    None,
                    entry.position,
                )
                self._write_to_scratch(validated)
                self._persist(entry.position, entry.length)  # the old record's length
                self._entries[cache_index] = validated
                last = self._invalid_snapshots.pop()  # IntArrayList.fastUnorderedRemove(i)
                if i < len(self._invalid_snapshots):
                    self._invalid_snapshots[i] = last
                self._changes.append(
                    ("appendStandbySnapshot" if entry_type == EntryType.STANDBY_SNAPSHOT else "appendSnapshot",
                     entry_to_json(validated))
                )
                return True
        return False

    def _append(
        self,
        op: str,
        entry_type: EntryType,
        recording_id: int,
        leadership_term_id: int,
        term_base_log_position: int,
        log_position: int,
        timestamp: int,
        service_id: int,
        endpoint: str | None,
    ) -> int:
        entry = Entry(
            recording_id,
            leadership_term_id,
            term_base_log_position,
            log_position,
            timestamp,
            service_id,
            entry_type,
            True,
            self._next_entry_index,
            endpoint,
            _align(len(self._file), RECORD_ALIGNMENT),
        )
        self._write_to_scratch(entry)
        self._persist(entry.position, entry.length)
        self._next_entry_index += 1

        entries = self._entries
        size = len(entries)
        index = size
        for i in range(size - 1, -1, -1):
            if _compare(entry, entries[i]) < 0:
                index -= 1
            else:
                break
        if index < size:
            entries.insert(index, entry)
            self._index.increment_values_of_keys_above(leadership_term_id)
            for i in range(len(self._invalid_snapshots) - 1, -1, -1):
                if self._invalid_snapshots[i] >= index:
                    self._invalid_snapshots[i] += 1
                else:
                    break  # Aeron assumes this list is ascending
        else:
            entries.append(entry)
        self._changes.append((op, entry_to_json(entry)))
        return index

    def _write_to_scratch(self, entry: Entry) -> None:
        """`writeEntryToBuffer`: the 48 fixed bytes, then the endpoint if there is one."""
        _FIELDS.pack_into(
            self._scratch,
            0,
            entry.recording_id,
            entry.leadership_term_id,
            entry.term_base_log_position,
            entry.log_position,
            entry.timestamp,
            entry.service_id,
            int(entry.type),
        )
        if entry.archive_endpoint:
            encoded = _put_string_ascii(entry.archive_endpoint)
            self._scratch[ENDPOINT_OFFSET : ENDPOINT_OFFSET + len(encoded)] = encoded

    def _persist(self, position: int, length: int) -> None:
        """`persistToStorage`: write the first `length` bytes of the scratch buffer at `position`."""
        data = self._scratch[:length]
        end = position + length
        if end > len(self._file):
            self._file.extend(bytes(end - len(self._file)))  # a write past the end leaves zeros before
        self._file[position:end] = data

    # -- reload -----------------------------------------------------------------------------------------

    def _reload(self, *, mode: str) -> None:
        """Aeron's `reload()`.  `mode`: "strict" / "lenient" (decode) or "mutation" (removeEntry)."""
        self._entries = []
        self._index = _Long2LongHashMap()
        self._invalid_snapshots = []
        self._next_entry_index = 0
        self._removed = []
        self._anomalies = []
        self._misread_spans = []
        self._mode = mode
        self._stopped = False
        try:
            consumed_total = self._read_chunks()
            self._note_unread_tail(consumed_total)
        except _Refusal as refusal:
            if mode == "mutation":
                raise RecordingLogError(refusal.message) from None
            raise DecodeError(refusal.message, source=self._source, offset=refusal.offset) from None

        self._entries.sort(key=ENTRY_SORT_KEY)
        for i, entry in enumerate(self._entries):
            if _is_valid_term(entry):
                self._index.put(entry.leadership_term_id, i)
            if not entry.is_valid and entry.type in (EntryType.SNAPSHOT, EntryType.STANDBY_SNAPSHOT):
                self._invalid_snapshots.append(i)

    def _read_chunks(self) -> int:
        """The FileChannel.read / flip / capture / compact loop over the reused 4 KiB buffer."""
        file, scratch = self._file, self._scratch
        file_position = consume_position = buffer_position = 0
        while True:
            if buffer_position == len(scratch):
                break  # no room left: FileChannel.read returns 0 and Aeron stops reading
            if file_position >= len(file):
                break  # end of file: read returns -1
            count = min(len(scratch) - buffer_position, len(file) - file_position)
            scratch[buffer_position : buffer_position + count] = file[file_position : file_position + count]
            file_position += count
            limit = buffer_position + count
            consumed = self._capture(consume_position, limit)
            consume_position += consumed
            remaining = limit - consumed
            scratch[0:remaining] = scratch[consumed:limit]  # ByteBuffer.compact()
            buffer_position = remaining
            if self._stopped:
                break
        return consume_position

    def _capture(self, file_position: int, limit: int) -> int:
        """`captureEntriesFromBuffer` over scratch[0:limit]; returns the bytes consumed."""
        buffer = self._scratch
        consumed = 0
        self._stopped = False
        while consumed + ENDPOINT_OFFSET < limit:
            position = file_position + consumed
            fields = _FIELDS.unpack_from(buffer, consumed)
            raw_type = fields[6]
            masked = raw_type & 0x7FFF_FFFF
            endpoint = None
            if masked == EntryType.STANDBY_SNAPSHOT:
                endpoint_offset = consumed + ENDPOINT_OFFSET
                if endpoint_offset + 4 > limit:
                    break
                length = _INT32.unpack_from(buffer, endpoint_offset)[0]
                if endpoint_offset + 4 + length > limit:
                    break  # not all in the buffer yet; Aeron compacts and reads more
                if length < 0:
                    self._refuse(f"STANDBY_SNAPSHOT archiveEndpoint length {length} is negative", position)
                    self._stopped = True
                    return consumed
                endpoint = bytes(buffer[endpoint_offset + 4 : endpoint_offset + 4 + length]).decode(
                    "ascii", "replace"
                )
            entry = Entry(
                fields[0],
                fields[1],
                fields[2],
                fields[3],
                fields[4],
                fields[5],
                _as_type(masked),
                raw_type >= 0,
                self._next_entry_index,
                endpoint,
                position,
            )
            if raw_type == REMOVED_ENTRY_TYPE:
                self._removed.append((self._next_entry_index, position))
                self._detect_removed_standby(position)
            else:
                self._check_record(entry)
                self._entries.append(entry)
            consumed += entry.length
            self._next_entry_index += 1
        if consumed > limit:
            # Java's ByteBuffer.position(consumed) throws: the last record is cut short.
            self._refuse(
                f"record at offset {file_position + consumed - 64} is cut short: "
                f"{limit - (consumed - 64)} of 64 bytes (Aeron 1.47.3 fails to load this file)",
                file_position + consumed - 64,
            )
            self._stopped = True
            return limit
        return consumed

    def _check_record(self, entry: Entry) -> None:
        position = entry.position
        if entry.type == EntryType.STANDBY_SNAPSHOT and not entry.archive_endpoint:
            self._refuse("Remote snapshots must has a valid endpoint (STANDBY_SNAPSHOT without archiveEndpoint)", position)
        if entry.type == EntryType.TERM:
            if entry.recording_id == NULL_VALUE:
                self._refuse(f"invalid recordingId={entry.recording_id}", position)
            elif entry.recording_id != self._term_recording_id:
                if self._term_recording_id == NULL_VALUE:
                    self._term_recording_id = entry.recording_id
                else:
                    self._refuse(
                        f"invalid TERM recordingId={entry.recording_id}, "
                        f"expected recordingId={self._term_recording_id}",
                        position,
                    )
        misread = any(start < position < end for start, end in self._misread_spans)
        if entry.type not in (0, 1, 2):
            self._never_written(
                f"entry type {entry.type} (0x{int(entry.type) | (0 if entry.is_valid else ENTRY_TYPE_INVALID_FLAG):08x}) "
                "is not TERM, SNAPSHOT or STANDBY_SNAPSHOT (Aeron prints it as UNKNOWN)",
                position,
                misread,
            )
        elif entry.type == EntryType.TERM and entry.service_id != NULL_VALUE:
            self._never_written(
                f"TERM entry with serviceId {entry.service_id}; Aeron writes -1", position, misread
            )

    def _refuse(self, message: str, offset: int) -> None:
        """Aeron itself throws here while loading."""
        for start, end in self._misread_spans:
            if start < offset < end:
                message += f" (a record misread from inside the removed STANDBY_SNAPSHOT at offset {start})"
                break
        if self._mode == "lenient":
            self._anomalies.append(f"offset {offset}: {message} (Aeron refuses to load this file)")
            return
        raise _Refusal(message, offset)

    def _never_written(self, message: str, offset: int, misread: bool) -> None:
        """Aeron loads this, but never writes it: strict decoding rejects it unless Aeron misreads."""
        if misread:
            self._anomalies.append(f"offset {offset}: misread record: {message}")
        elif self._mode == "strict":
            raise _Refusal(f"{message}; not a recording.log written by Aeron", offset)
        else:
            self._anomalies.append(f"offset {offset}: {message}")

    def _detect_removed_standby(self, position: int) -> None:
        """A removed STANDBY_SNAPSHOT longer than 64 bytes: Aeron reads on from inside it."""
        file = self._file
        if position + ENDPOINT_OFFSET + 4 > len(file):
            return
        length = _INT32.unpack_from(file, position + ENDPOINT_OFFSET)[0]
        start = position + ENDPOINT_OFFSET + 4
        if not 12 < length <= MAX_ENDPOINT_LENGTH or start + length > len(file):
            return
        text = file[start : start + length]
        if not all(0x20 <= byte < 0x7F for byte in text):
            return
        end = position + _align(ENDPOINT_OFFSET + 4 + length, RECORD_ALIGNMENT)
        self._misread_spans.append((position, end))
        inside = (end - position) // RECORD_ALIGNMENT - 1
        self._anomalies.append(
            f"offset {position}: removed STANDBY_SNAPSHOT record (archiveEndpoint "
            f"'{text.decode('ascii')}') spans {end - position} bytes, but Aeron skips only 64 for a "
            f"removed record, so it misreads the {inside} record(s) at offsets "
            f"{', '.join(str(position + RECORD_ALIGNMENT * (k + 1)) for k in range(inside))} "
            "(Aeron 1.47.3 does the same)"
        )

    def _note_unread_tail(self, consumed: int) -> None:
        """Bytes Aeron's reader leaves unread at the end.  Aeron writes whole records only, so these are
        a torn write or a truncated copy: Aeron ignores them, strict decoding refuses the file."""
        tail = len(self._file) - consumed
        if tail <= 0 or self._stopped:
            return
        file = self._file
        if tail > ENDPOINT_OFFSET and (_INT32.unpack_from(file, consumed + ENTRY_TYPE_OFFSET)[0] & 0x7FFF_FFFF) == 2:
            length = _INT32.unpack_from(file, consumed + ENDPOINT_OFFSET)[0] if tail >= 52 else None
            if length is not None and length > MAX_ENDPOINT_LENGTH:
                message = (
                    f"STANDBY_SNAPSHOT archiveEndpoint length {length} exceeds {MAX_ENDPOINT_LENGTH}; "
                    f"Aeron silently stops reading here, ignoring the last {tail} bytes"
                )
            else:
                message = (
                    f"the last STANDBY_SNAPSHOT record is cut short ({tail} bytes, archiveEndpoint length "
                    f"{length}); Aeron ignores it"
                )
        else:
            message = (
                f"file ends {tail} byte(s) into a record ({len(self._file)} bytes is not a whole number of "
                "64-byte records); Aeron ignores the partial record"
            )
        self._never_written(message, consumed, False)


def _signed32(value: int) -> int:
    value &= _MASK32
    return value - (1 << 32) if value & 0x8000_0000 else value


def _put_string_ascii(value: str) -> bytes:
    """Agrona `putStringAscii`: int32 length (native order; LE everywhere Aeron runs), chars > 127 as '?'."""
    encoded = bytes(ord(c) if ord(c) < 128 else ord("?") for c in value)
    return _INT32.pack(len(encoded)) + encoded


def _validate_recording_id(recording_id: int) -> None:
    if recording_id == NULL_VALUE:
        raise RecordingLogError(f"invalid recordingId={recording_id}")


def _is_valid_term(entry: Entry) -> bool:
    return entry.type == EntryType.TERM and entry.is_valid


def _is_valid_snapshot(entry: Entry) -> bool:
    return entry.type == EntryType.SNAPSHOT and entry.is_valid


def _is_valid_any_snapshot(entry: Entry) -> bool:
    return entry.is_valid and entry.type in (EntryType.SNAPSHOT, EntryType.STANDBY_SNAPSHOT)


def _add_snapshots(entries: list[Entry], service_count: int, snapshot_index: int) -> list[Snapshot]:
    """Aeron's `addSnapshots`: the CM snapshot first, then each service's at list position serviceId+1."""

    def snapshot_of(entry: Entry) -> Snapshot:
        return Snapshot(
            entry.recording_id,
            entry.leadership_term_id,
            entry.term_base_log_position,
            entry.log_position,
            entry.timestamp,
            entry.service_id,
        )

    cm = entries[snapshot_index]
    snapshots = [snapshot_of(cm)]
    for i in range(1, service_count + 1):
        if snapshot_index - i < 0:
            raise RecordingLogError(
                f"snapshot missing for service at index {i} in [{', '.join(str(e) for e in entries)}]"
            )
        entry = entries[snapshot_index - i]
        if (
            entry.type == EntryType.SNAPSHOT
            and entry.leadership_term_id == cm.leadership_term_id
            and entry.log_position == cm.log_position
        ):
            position = entry.service_id + 1
            if not 0 <= position <= len(snapshots):
                raise RecordingLogError(
                    f"Index: {position}, Size: {len(snapshots)} (snapshot for serviceId {entry.service_id})"
                )
            snapshots.insert(position, snapshot_of(entry))
    return snapshots


def _removed_record() -> bytes:
    record = bytearray(RECORD_ALIGNMENT)
    _INT32.pack_into(record, ENTRY_TYPE_OFFSET, REMOVED_ENTRY_TYPE)
    return bytes(record)


def encode_entry(entry: Entry) -> bytes:
    """One record as Aeron writes it (unused tail bytes zero), with the invalid flag if not valid."""
    raw_type = int(entry.type) | (0 if entry.is_valid else ENTRY_TYPE_INVALID_FLAG)
    head = _FIELDS.pack(
        entry.recording_id,
        entry.leadership_term_id,
        entry.term_base_log_position,
        entry.log_position,
        entry.timestamp,
        entry.service_id,
        _signed32(raw_type),
    )
    body = head + (_put_string_ascii(entry.archive_endpoint) if entry.archive_endpoint else b"")
    return body + bytes(entry.length - len(body))


def to_clustertool(log: RecordingLog) -> str:
    """Exactly what `ClusterTool <dir> recording-log` prints for this log (one line, no newline)."""
    return f"RecordingLog{{entries=[{', '.join(str(e) for e in log.entries)}], cacheIndex={log._index}}}"


# ---------------------------------------------------------------------------------------------------
# JSON (contract §3)
# ---------------------------------------------------------------------------------------------------

_JSON_TYPES = {"TERM": EntryType.TERM, "SNAPSHOT": EntryType.SNAPSHOT, "STANDBY_SNAPSHOT": EntryType.STANDBY_SNAPSHOT}


def entry_to_json(entry: Entry) -> dict[str, Any]:
    document: dict[str, Any] = {
        "entryIndex": entry.entry_index,
        "recordingId": entry.recording_id,
        "leadershipTermId": entry.leadership_term_id,
        "termBaseLogPosition": entry.term_base_log_position,
        "logPosition": entry.log_position,
        "timestamp": entry.timestamp,
        "serviceId": entry.service_id,
        "type": entry.type_name,
        "isValid": entry.is_valid,
    }
    if entry.archive_endpoint is not None:
        document["archiveEndpoint"] = entry.archive_endpoint
    return document


def entry_from_json(document: Mapping[str, Any], *, entry_index: int = 0, source: str | None = None) -> Entry:
    """An Entry from `inspect recording-log --json` keys (MemberStart.recordingLog uses it).

    entryIndex (default `entry_index`), isValid (true), serviceId (−1) and type ("TERM") may be absent;
    the positions, ids and timestamp must be present.  Bad values raise DecodeError.
    """
    if not isinstance(document, Mapping):
        raise DecodeError(f"a recording-log entry must be a JSON object, not {type(document).__name__}", source=source)

    def integer(key: str, default: int | None, low: int, high: int) -> int:
        value = document.get(key, default)
        if value is None:
            raise DecodeError(f"recording-log entry is missing '{key}'", source=source)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise DecodeError(f"recording-log entry '{key}' must be an integer in [{low}, {high}], got {value!r}", source=source)
        return value

    name = document.get("type", "TERM")
    if isinstance(name, str) and name in _JSON_TYPES:
        entry_type = _JSON_TYPES[name]
    elif isinstance(name, int) and not isinstance(name, bool) and name in (0, 1, 2):
        entry_type = EntryType(name)
    else:
        raise DecodeError(f"recording-log entry 'type' must be TERM, SNAPSHOT or STANDBY_SNAPSHOT, got {name!r}", source=source)
    is_valid = document.get("isValid", True)
    if not isinstance(is_valid, bool):
        raise DecodeError(f"recording-log entry 'isValid' must be true or false, got {is_valid!r}", source=source)
    endpoint = document.get("archiveEndpoint")
    if endpoint is not None and not isinstance(endpoint, str):
        raise DecodeError(f"recording-log entry 'archiveEndpoint' must be a string, got {endpoint!r}", source=source)
    if entry_type == EntryType.STANDBY_SNAPSHOT:
        if not endpoint:
            raise DecodeError("a STANDBY_SNAPSHOT entry needs a non-empty 'archiveEndpoint'", source=source)
        if len(endpoint) > MAX_ENDPOINT_LENGTH:
            raise DecodeError(f"'archiveEndpoint' is longer than {MAX_ENDPOINT_LENGTH} characters", source=source)
    else:
        endpoint = None  # only standby snapshots carry one on disk
    return Entry(
        recording_id=integer("recordingId", None, _INT64_MIN, _INT64_MAX),
        leadership_term_id=integer("leadershipTermId", None, _INT64_MIN, _INT64_MAX),
        term_base_log_position=integer("termBaseLogPosition", None, _INT64_MIN, _INT64_MAX),
        log_position=integer("logPosition", None, _INT64_MIN, _INT64_MAX),
        timestamp=integer("timestamp", None, _INT64_MIN, _INT64_MAX),
        service_id=integer("serviceId", NULL_VALUE, _INT32_MIN, _INT32_MAX),
        type=entry_type,
        is_valid=is_valid,
        entry_index=integer("entryIndex", entry_index, 0, _INT32_MAX),
        archive_endpoint=endpoint,
    )


def entries_from_json(documents: Iterable[Mapping[str, Any]], *, source: str | None = None) -> list[Entry]:
    """Entries from a JSON list; an absent entryIndex defaults to the entry's place in the list."""
    return [entry_from_json(d, entry_index=i, source=source) for i, d in enumerate(documents)]


def to_json(log: RecordingLog) -> dict[str, Any]:
    """`inspect recording-log --json`: entries in Aeron's in-memory order, plus any anomalies."""
    return {"entries": [entry_to_json(e) for e in log.entries], "anomalies": list(log.anomalies)}
