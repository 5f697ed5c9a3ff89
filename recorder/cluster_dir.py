"""One cluster member's directory, read from disk: recording.log, node-state.dat and the mark files.

Theory of operation: the `load_*` functions open one file each, guard against inputs that cannot be
what they claim (a directory, a file far larger than Aeron ever writes) and hand the bytes to the
codecs in `formats`; every error names the file.  `read_cluster_dir` loads whatever of a member's
files are present, keeps a file that fails to load as a problem rather than giving up on the rest,
and `find_problems` then cross-checks the files against each other (a TERM that ends behind the
next term's base, a node-state candidateTermId below the last term, mark files that disagree, ...).
"""

from __future__ import annotations

import errno
import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from formats import archive_catalog as ac
from formats import recording_log as rl
from formats.errors import DecodeError
from formats.mark_file import MarkFile
from formats.node_state import NodeStateFile, node_state_to_json

RECORDING_LOG = "recording.log"
NODE_STATE = "node-state.dat"
MARK_FILE = "cluster-mark.dat"
SERVICE_MARK_FILE_PREFIX = "cluster-mark-service-"
MARK_FILE_SUFFIX = ".dat"
LINK_FILE_SUFFIX = ".lnk"

#: Guards against reading something huge by mistake.  Aeron's recording.log grows by 64 bytes per
#: term or snapshot (a million entries is 64 MiB); node-state.dat is created at 1 MiB.
MAX_RECORDING_LOG_BYTES = 64 << 20
MAX_NODE_STATE_BYTES = 64 << 20
ARCHIVE_CATALOG = "archive.catalog"
#: Aeron Archive pre-sizes its catalog at 1 MiB and grows it as recordings are added.
MAX_ARCHIVE_CATALOG_BYTES = 1 << 30


def _check_file(path: Path, what: str) -> int:
    try:
        stat = path.stat()
    except FileNotFoundError:
        raise FileNotFoundError(errno.ENOENT, f"no such file (expected {what})", str(path)) from None
    if path.is_dir():
        raise IsADirectoryError(errno.EISDIR, f"is a directory; expected {what}", str(path))
    return stat.st_size


def _read(path: Path, what: str, limit: int) -> bytes:
    size = _check_file(path, what)
    if size > limit:
        raise DecodeError(
            f"{size} bytes is far larger than any {what} (at most {limit} accepted); wrong file?", source=str(path)
        )
    return path.read_bytes()


def load_recording_log(path: str | os.PathLike[str], *, strict: bool = True) -> rl.RecordingLog:
    path = Path(path)
    return rl.RecordingLog.decode(_read(path, "a recording.log", MAX_RECORDING_LOG_BYTES), source=str(path), strict=strict)


def find_archive_catalog(path: str | os.PathLike[str]) -> Path:
    """The ``archive.catalog`` that ``path`` names: the file, an archive dir holding it, or a member's
    dir whose ``archive/`` holds it (Aeron lays the archive dir next to or inside the cluster dir)."""
    path = Path(path)
    if not path.is_dir():
        return path
    for candidate in (path / ARCHIVE_CATALOG, path / "archive" / ARCHIVE_CATALOG, path.parent / "archive" / ARCHIVE_CATALOG):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(errno.ENOENT, f"no {ARCHIVE_CATALOG} in it or in its archive/ (expected an Aeron "
                            "archive dir)", str(path))


#: Names a tarball of a member's archive dir may have beside its cluster files (as the reference captures keep it).
ARCHIVE_TARBALLS = ("archive.tar.gz", "archive.tgz", "archive.tar")


def find_member_archive(cluster_dir: str | os.PathLike[str]) -> Path | None:
    """The archive of the member whose cluster dir this is, where Aeron lays it out: an ``archive/``
    dir inside the cluster dir, or next to it (``<base>/cluster`` and ``<base>/archive``, Aeron's default
    names); else a tarball of it kept beside the cluster files.  None when there is none."""
    path = Path(cluster_dir)
    inside, beside = path / "archive", path.parent / "archive"
    if (inside / ARCHIVE_CATALOG).is_file():
        return inside
    # Beside it only when it is this member's alone: no other cluster dir shares the parent.
    siblings = [p for p in path.parent.iterdir() if p.is_dir() and p.resolve() != path.resolve()
                and any((p / name).is_file() for name in (RECORDING_LOG, NODE_STATE, MARK_FILE))]
    if (beside / ARCHIVE_CATALOG).is_file() and beside.resolve() != path.resolve() and not siblings:
        return beside
    if (path / ARCHIVE_CATALOG).is_file():
        return path
    for name in ARCHIVE_TARBALLS:
        if (path / name).is_file():
            return path / name
    return None


def read_archive_catalog_bytes(path: str | os.PathLike[str]) -> tuple[bytes, str]:
    """The catalog's bytes and the name to give them in errors: from the file or dir `find_archive_catalog`
    finds, or from a ``.tar.gz``/``.tgz``/``.tar`` of an archive dir (read in memory, nothing written)."""
    path = Path(path)
    name = path.name.lower()
    if path.is_file() and name.endswith((".tar.gz", ".tgz", ".tar")):
        import tarfile

        try:
            with tarfile.open(path, "r|*") as tar:
                for member in tar:
                    if member.isfile() and Path(member.name).name == ARCHIVE_CATALOG:
                        if member.size > MAX_ARCHIVE_CATALOG_BYTES:
                            break
                        handle = tar.extractfile(member)
                        if handle is not None:
                            return handle.read(), f"{path}:{member.name.lstrip('./')}"
        except (tarfile.TarError, EOFError, OSError) as error:
            raise DecodeError(f"not a readable tar archive ({error})", source=str(path)) from None
        raise FileNotFoundError(errno.ENOENT, f"no {ARCHIVE_CATALOG} in the archive", str(path))
    catalog = find_archive_catalog(path)
    return _read(catalog, "an archive.catalog", MAX_ARCHIVE_CATALOG_BYTES), str(catalog)


def load_archive_catalog(path: str | os.PathLike[str]) -> ac.Catalog:
    """An Aeron Archive catalog, from what `read_archive_catalog_bytes` accepts."""
    data, source = read_archive_catalog_bytes(path)
    return ac.read_catalog(data, source=source)


def load_node_state(path: str | os.PathLike[str]) -> NodeStateFile:
    path = Path(path)
    return NodeStateFile.decode(_read(path, "a node-state.dat", MAX_NODE_STATE_BYTES), source=str(path))


def load_mark_file(path: str | os.PathLike[str]) -> MarkFile:
    """Mark files may legitimately be up to 2 GiB (the error buffer), so they are memory-mapped."""
    path = Path(path)
    size = _check_file(path, "a cluster mark file")
    if size == 0:
        return MarkFile.decode(b"", source=str(path))
    with open(path, "rb") as file, mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        return MarkFile.decode(mapped, source=str(path))


@dataclass(frozen=True)
class ClusterDir:
    """What one member's cluster directory holds; a file that failed to load is None plus a load error."""

    path: Path
    recording_log: rl.RecordingLog | None
    node_state: NodeStateFile | None
    mark_files: dict[str, MarkFile]  # by file name: cluster-mark.dat first, then services by name
    load_errors: tuple[str, ...] = ()
    link_files: dict[str, str] = field(default_factory=dict)
    file_names: tuple[str, ...] = ()  # everything in the directory when it was read

    @property
    def problems(self) -> list[str]:
        return find_problems(self)


def read_cluster_dir(path: str | os.PathLike[str]) -> ClusterDir:
    directory = Path(path)
    if not directory.exists():
        raise FileNotFoundError(errno.ENOENT, "no such directory (expected an Aeron cluster directory)", str(directory))
    if not directory.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, "not a directory (expected an Aeron cluster directory)", str(directory))
    names = sorted(p.name for p in directory.iterdir())
    # The consensus module's mark file first, then the services' in name order.
    mark_names = [MARK_FILE] if MARK_FILE in names else []
    mark_names += [n for n in names if n.startswith(SERVICE_MARK_FILE_PREFIX) and n.endswith(MARK_FILE_SUFFIX)]
    link_names = [n for n in names if n.startswith("cluster-mark") and n.endswith(LINK_FILE_SUFFIX)]
    if RECORDING_LOG not in names and NODE_STATE not in names and not mark_names and not link_names:
        raise DecodeError(
            "holds no recording.log, node-state.dat or cluster-mark*.dat: not an Aeron cluster directory",
            source=str(directory),
        )

    load_errors: list[str] = []

    def attempt(loader: Any, name: str) -> Any:
        try:
            return loader(directory / name)
        except (DecodeError, OSError) as error:
            load_errors.append(f"{name}: cannot be read: {_one_line(error)}")
            return None

    log = None
    if RECORDING_LOG in names:
        log = attempt(lambda p: load_recording_log(p, strict=False), RECORDING_LOG)
    node_state = attempt(load_node_state, NODE_STATE) if NODE_STATE in names else None
    marks = {}
    for name in mark_names:
        mark = attempt(load_mark_file, name)
        if mark is not None:
            marks[name] = mark
    links = {}
    for name in link_names:
        try:
            links[name] = (directory / name).read_bytes().decode("ascii", "replace")
        except OSError as error:
            load_errors.append(f"{name}: cannot be read: {_one_line(error)}")
    return ClusterDir(directory, log, node_state, marks, tuple(load_errors), links, tuple(names))


def _one_line(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error).replace("\n", " ")


def _service_id_of(name: str) -> int | None:
    middle = name[len(SERVICE_MARK_FILE_PREFIX) : -len(MARK_FILE_SUFFIX)]
    return int(middle) if middle.isdigit() else None


def find_problems(cluster_dir: ClusterDir) -> list[str]:
    """Inconsistencies within and between one member's files, worst first within each file."""
    problems = list(cluster_dir.load_errors)
    log = cluster_dir.recording_log
    names_present = set(cluster_dir.file_names)
    if RECORDING_LOG not in names_present:
        problems.append("recording.log is missing (the member never started, or this is not its cluster dir)")
    if NODE_STATE not in names_present:
        problems.append("node-state.dat is missing (written by Aeron 1.41+ at startup)")

    last_term = None
    if log is not None:
        problems += [f"recording.log: {anomaly}" for anomaly in log.anomalies]
        problems += _term_problems(log)
        problems += _snapshot_problems(log, cluster_dir)
        last_term = log.find_last_term()

    node_state = cluster_dir.node_state
    cm = cluster_dir.mark_files.get(MARK_FILE)
    if node_state is not None:
        candidate = node_state.candidate_term.candidate_term_id
        if last_term is not None and candidate < last_term.leadership_term_id:
            problems.append(
                f"node-state.dat: candidateTermId {candidate} is below the last TERM's leadershipTermId "
                f"{last_term.leadership_term_id} (recording.log entryIndex {last_term.entry_index})"
            )
        if cm is not None and cm.header.candidate_term_id > candidate:
            problems.append(
                f"node-state.dat: candidateTermId {candidate} is below cluster-mark.dat's candidateTermId "
                f"{cm.header.candidate_term_id} (Aeron copies it over only when node-state.dat says -1)"
            )
    problems += _mark_file_problems(cluster_dir)
    for name, target in sorted(cluster_dir.link_files.items()):
        problems.append(f"{name}: the mark file lives in {target!r}, outside this directory (not read)")
    return problems


def _term_problems(log: rl.RecordingLog) -> list[str]:
    problems = []
    terms = [e for e in log.entries if e.type == rl.EntryType.TERM and e.is_valid]
    by_term: dict[int, list[rl.Entry]] = {}
    for entry in terms:
        by_term.setdefault(entry.leadership_term_id, []).append(entry)
    for term_id, same in sorted(by_term.items()):
        if len(same) > 1:
            problems.append(
                f"recording.log: {len(same)} valid TERM entries for leadershipTermId {term_id} "
                f"(entryIndex {', '.join(str(e.entry_index) for e in same)})"
            )
    ordered = [by_term[t][-1] for t in sorted(by_term)]
    for entry in ordered:
        if entry.log_position != rl.NULL_VALUE and entry.log_position < entry.term_base_log_position:
            problems.append(
                f"recording.log: TERM {entry.leadership_term_id} (entryIndex {entry.entry_index}) ends at "
                f"logPosition {entry.log_position}, before its termBaseLogPosition {entry.term_base_log_position}"
            )
    for previous, current in zip(ordered, ordered[1:], strict=False):
        where = f"TERM {previous.leadership_term_id} (entryIndex {previous.entry_index})"
        if current.leadership_term_id != previous.leadership_term_id + 1:
            problems.append(
                f"recording.log: no TERM entries for leadershipTermId {previous.leadership_term_id + 1}.."
                f"{current.leadership_term_id - 1} (Aeron fills every term in between)"
            )
        if previous.log_position == rl.NULL_VALUE:
            problems.append(
                f"recording.log: {where} is still open (logPosition -1) although TERM "
                f"{current.leadership_term_id} exists"
            )
        elif previous.log_position < current.term_base_log_position:
            problems.append(
                f"recording.log: {where} ends at logPosition {previous.log_position}, behind the next term's "
                f"termBaseLogPosition {current.term_base_log_position} (TERM {current.leadership_term_id})"
            )
        elif previous.log_position > current.term_base_log_position:
            problems.append(
                f"recording.log: {where} ends at logPosition {previous.log_position}, beyond the next term's "
                f"termBaseLogPosition {current.term_base_log_position} (TERM {current.leadership_term_id})"
            )
        if current.term_base_log_position < previous.term_base_log_position:
            problems.append(
                f"recording.log: termBaseLogPosition goes backwards from {previous.term_base_log_position} "
                f"(TERM {previous.leadership_term_id}) to {current.term_base_log_position} (TERM {current.leadership_term_id})"
            )
    in_file_order = [e.leadership_term_id for e in sorted(terms, key=lambda e: e.entry_index)]
    if in_file_order != sorted(in_file_order):
        problems.append(
            f"recording.log: TERM entries are not in ascending leadershipTermId in file order ({in_file_order})"
        )
    for entry in log.file_entries:
        if not entry.is_valid:
            problems.append(
                f"recording.log: entryIndex {entry.entry_index} ({entry.type_name}, leadershipTermId "
                f"{entry.leadership_term_id}, serviceId {entry.service_id}) is marked invalid"
            )
    return problems


def _snapshot_problems(log: rl.RecordingLog, cluster_dir: ClusterDir) -> list[str]:
    problems = []
    snapshots = [e for e in log.entries if e.type == rl.EntryType.SNAPSHOT and e.is_valid]
    for entry in snapshots:
        term = log.find_term_entry(entry.leadership_term_id)
        if term is None:
            problems.append(
                f"recording.log: SNAPSHOT entryIndex {entry.entry_index} is for leadershipTermId "
                f"{entry.leadership_term_id}, which has no valid TERM entry"
            )
        elif term.log_position != rl.NULL_VALUE and entry.log_position > term.log_position:
            problems.append(
                f"recording.log: SNAPSHOT entryIndex {entry.entry_index} at logPosition {entry.log_position} "
                f"lies beyond the end of TERM {term.leadership_term_id} ({term.log_position})"
            )
    service_files = set()
    for name in cluster_dir.mark_files:
        service_id = _service_id_of(name) if name != MARK_FILE else None
        if service_id is not None:
            service_files.add(service_id)
    snapshot_services = {e.service_id for e in snapshots if e.service_id >= 0}
    service_count = len(service_files) if service_files else len(snapshot_services)
    if snapshots:
        try:
            log.recovery_plan_terms(service_count)
        except rl.RecordingLogError as error:
            problems.append(f"recording.log: recovery plan for {service_count} service(s) fails: {error}")
        if service_files and snapshot_services and snapshot_services != service_files:
            problems.append(
                f"recording.log has snapshots for services {sorted(snapshot_services)} but the mark files are "
                f"for services {sorted(service_files)}"
            )
    return problems


def _mark_file_problems(cluster_dir: ClusterDir) -> list[str]:
    problems = []
    marks = cluster_dir.mark_files
    cm = marks.get(MARK_FILE)
    for name, mark in marks.items():
        kind = mark.component_type_name
        if name == MARK_FILE and kind not in ("CONSENSUS_MODULE", "BACKUP"):
            problems.append(f"{name}: componentType {kind}; expected CONSENSUS_MODULE (or BACKUP)")
        if name != MARK_FILE:
            if kind != "CONTAINER":
                problems.append(f"{name}: componentType {kind}; expected CONTAINER")
            service_id = _service_id_of(name)
            if service_id is not None and mark.header.service_id != service_id:
                problems.append(f"{name}: serviceId {mark.header.service_id} does not match the file name")
            if cm is not None and mark.header.member_id != cm.header.member_id:
                problems.append(
                    f"{name}: memberId {mark.header.member_id} differs from cluster-mark.dat's memberId {cm.header.member_id}"
                )
            if cm is not None and mark.header.cluster_id != cm.header.cluster_id:
                problems.append(
                    f"{name}: clusterId {mark.header.cluster_id} differs from cluster-mark.dat's clusterId {cm.header.cluster_id}"
                )
        if mark.header.version == -1:
            problems.append(f"{name}: version -1: the component failed to start")
        elif mark.header.version == 0:
            problems.append(f"{name}: version 0: the component never signalled ready (crashed while starting?)")
        unexpected = [e for e in mark.errors if not e.encoded_error.startswith(_EXPECTED_TERMINATION)]
        if unexpected:
            first_line = unexpected[-1].encoded_error.splitlines()[0] if unexpected[-1].encoded_error else ""
            problems.append(f"{name}: {len(unexpected)} distinct error(s) recorded, e.g. {first_line}")
    return problems


#: The error every component logs on an orderly shutdown; not worth a problem line.
_EXPECTED_TERMINATION = "io.aeron.cluster.service.ClusterTerminationException"


def cluster_dir_to_json(cluster_dir: ClusterDir) -> dict[str, Any]:
    """`inspect cluster-dir --json`: every file's own --json document, and the problems found."""
    log = cluster_dir.recording_log
    return {
        "directory": str(cluster_dir.path),
        "recordingLog": rl.to_json(log) if log is not None else None,
        "nodeState": node_state_to_json(cluster_dir.node_state.state) if cluster_dir.node_state is not None else None,
        "markFiles": {name: mark.to_json() for name, mark in cluster_dir.mark_files.items()},
        "problems": find_problems(cluster_dir),
    }
