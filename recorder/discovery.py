"""Finding an incident's inputs in directories (and tarballs): the one discovery every command uses.

Theory of operation.  People bring incidents as directories: a whole incident (captures from one or
several hosts, and one directory per member), one member's directory, a `.tar.gz` of either, or a
tree of many incidents for bulk conversion.  `discover` walks the paths given (following symbolic
links) and keeps what recount reads:

- files that are pcap/pcapng captures (by magic, or named ``*.pcap``/``*.pcapng``/``*.cap``),
  aeron-agent logs (by their first line) and JSON Lines (``*.jsonl``);
- members' cluster directories (by their files: ``recording.log``, ``node-state.dat``, mark files),
  which are inputs as a whole; their other files are still looked at, for the agent logs people keep
  beside them.  A cluster directory *inside* another one (a ``before/`` copy of the starting state,
  a backup) is not a second member: it is passed over, with a note.

Everything else (ClusterTool text, stdout logs, tarballs inside an incident) is ignored; a member's
archive directory is not an input of its own when walking, it is read through the cluster directory
it lies next to or inside (`recorder.cluster_dir.find_member_archive`), and one given on the command
line is taken as it is (not looked into).

Inputs are grouped into *incidents*: the directories ``incident_depth`` levels below a path given
(default 1, so ``captures/<incident>/...``; 0 makes each path given one incident); inputs lying
higher up belong to the incident of their own directory.  ``group_by="file"`` makes every
input its own incident.  Within an incident, inputs are in path order, each once.

`recount convert --engine spark` / ``--out-dir`` and the ``aeron-capture`` Spark data source call
`discover` on the trees they are given; the single-incident commands (``convert -o``, ``replay``,
``tui``, ``diff``, ...) call `expand_inputs`, which runs the same `discover` with depth 0 on each
directory or tarball given and leaves files as they are.  `distinct_inputs` drops an input given
twice (the same file by another path, or a byte-identical copy), saying so.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

INPUT_KINDS = ("pcap", "pcapng", "agent-log", "cluster-dir", "jsonl")
_JSONL_SUFFIXES = (".jsonl", ".ndjson")
_CAPTURE_SUFFIXES = (".pcap", ".pcapng", ".cap")
TARBALL_SUFFIXES = (".tar.gz", ".tgz", ".tar")


@dataclass(frozen=True, slots=True)
class Input:
    path: str
    kind: str  #: one of INPUT_KINDS
    size: int  #: bytes (of the files, for a cluster directory)


@dataclass(frozen=True, slots=True)
class Incident:
    name: str  #: path of its directory below the root ("/"-separated); the root's own name for the root
    directory: str
    inputs: tuple[Input, ...]
    #: What was passed over and why (nested cluster directories).
    notes: tuple[str, ...] = ()

    @property
    def paths(self) -> list[str]:
        return [i.path for i in self.inputs]

    @property
    def size(self) -> int:
        return sum(i.size for i in self.inputs)

    @property
    def source(self) -> str:
        """What the replay file's ``recount.source`` says: the inputs' names, as the local converter writes."""
        return ",".join(os.path.basename(p.rstrip("/")) for p in self.paths)


def input_kind(path: str) -> str | None:
    """Which kind of input ``path`` is (`INPUT_KINDS`), or None when it is none of them."""
    from recorder.capture import detect_format

    if os.path.isdir(path):
        return "cluster-dir" if detect_format(path) == "cluster-dir" else None
    if path.lower().endswith(_JSONL_SUFFIXES):
        return "jsonl"
    kind = detect_format(path)
    if kind is None and path.lower().endswith(_CAPTURE_SUFFIXES):
        # Named a capture: an input, so that what is wrong with it is reported rather than passed over.
        kind = "pcapng" if path.lower().endswith(".pcapng") else "pcap"
    return kind if kind in INPUT_KINDS else None


def _size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(path, n)) for n in sorted(os.listdir(path))
                   if os.path.isfile(os.path.join(path, n)))
    return os.path.getsize(path)


def _walk(root: str, notes: list[str]) -> Iterator[tuple[str, str]]:
    """(path, kind) of every input under ``root`` (``root`` included when it is a cluster directory),
    in path order; cluster dirs before their files; a cluster dir inside another one is noted, not kept."""
    seen: set[str] = set()
    cluster_dirs: list[str] = []
    for directory, subdirectories, files in os.walk(root, followlinks=True):
        # Symbolic links are followed (incidents are often assembled from links), each directory once.
        real = os.path.realpath(directory)
        if real in seen:
            subdirectories.clear()
            continue
        seen.add(real)
        subdirectories.sort()
        if input_kind(directory) == "cluster-dir":
            outer = next((d for d in cluster_dirs if directory.startswith(d.rstrip(os.sep) + os.sep)), None)
            if outer is not None:
                notes.append(f"{directory}: a cluster directory inside {outer}'s (a copy, not another member);"
                             " not read")
                subdirectories.clear()
                continue
            cluster_dirs.append(directory)
            yield directory, "cluster-dir"
        for name in sorted(files):
            path = os.path.join(directory, name)
            kind = input_kind(path)
            if kind is not None:
                yield path, kind


def discover(paths: Sequence[str], *, incident_depth: int = 1, group_by: str = "directory") -> list[Incident]:
    """The incidents under ``paths`` (directories or files), sorted by name.  See the module docstring."""
    if group_by not in ("directory", "file"):
        raise ValueError(f"groupBy must be 'directory' or 'file', not {group_by!r}")
    if incident_depth < 0:
        raise ValueError(f"incidentDepth must be 0 or more, not {incident_depth}")
    found: dict[str, tuple[str, list[Input], list[str]]] = {}
    for given in paths:
        # Absolute paths: tasks may run in another working directory (executors of a cluster).
        root = os.path.abspath(given)
        if not os.path.exists(root):
            raise FileNotFoundError(2, "no such file or directory", given)
        base = os.path.basename(root)
        notes: list[str] = []
        whole = input_kind(root) == "cluster-dir"  # one member's directory: everything in it is that incident's
        if os.path.isfile(root):
            kind = input_kind(root)
            if kind is None:
                continue
            entries = [(root, kind)]
            root_dir = os.path.dirname(root) or "."
        else:
            entries = list(_walk(root, notes))
            root_dir = root
        for path, kind in entries:
            relative = os.path.relpath(path, root_dir).replace(os.sep, "/")
            if root_dir != root or whole:  # the path given is itself an input (a file, a cluster dir)
                name, directory = base, root if whole else path
            elif group_by == "file":
                name, directory = relative, path
            else:
                parts = relative.split("/")
                # The incident is the directory `incident_depth` levels down; cluster dirs and files above
                # that level belong to the directory holding them.
                own_dirs = parts[:-1]
                while own_dirs and input_kind(os.path.join(root, *own_dirs)) == "cluster-dir":
                    own_dirs.pop()
                depth = min(incident_depth, len(own_dirs))
                name = "/".join(own_dirs[:depth]) or base
                directory = os.path.join(root, *own_dirs[:depth])
            if name in found and os.path.normpath(found[name][0]) != os.path.normpath(directory):
                raise ValueError(f"two incidents are named {name!r} ({found[name][0]} and {directory});"
                                 " load them separately or change incidentDepth")
            found.setdefault(name, (directory, [], []))[1].append(Input(path, kind, _size(path)))
        for note in notes:
            owner = next((n for n, (d, _, _) in found.items() if note.startswith(d.rstrip(os.sep) + os.sep)), None)
            if owner is not None:
                found[owner][2].append(note)
    incidents = []
    for name in sorted(found):
        directory, inputs, notes = found[name]
        unique = {i.path: i for i in inputs}
        incidents.append(Incident(name, directory, tuple(unique[p] for p in sorted(unique)), tuple(notes)))
    return incidents


# --- one incident, for the single commands -------------------------------------------------------------
def is_tarball(path: str | os.PathLike[str]) -> bool:
    return os.path.isfile(path) and os.fspath(path).lower().endswith(TARBALL_SUFFIXES)


def is_container(path: str | os.PathLike[str]) -> bool:
    """A tarball, or a directory that is not itself an input (an incident, or a member's directory
    holding its cluster dir and agent log): something to look into with `discover`.  A cluster directory
    given on its own is that member's files as given, even with an agent log inside it (as before
    directories were looked into; give the log too, or the incident's directory)."""
    name = os.fspath(path)
    if is_tarball(name):
        return True
    if os.path.isdir(name) and os.path.isfile(os.path.join(name, "archive.catalog")):
        return False  # an archive dir given on its own: read beside its cluster dir
    return os.path.isdir(name) and input_kind(name) != "cluster-dir"


def unpack(path: str, into: str) -> str:
    """Extract the tarball ``path`` under ``into`` (Python's ``data`` filter: no links out, no devices,
    no absolute names) and return the directory holding its contents (its single top directory, if any)."""
    with tarfile.open(path) as archive:
        archive.extractall(into, filter="data")
    entries = sorted(os.listdir(into))
    if len(entries) == 1 and os.path.isdir(os.path.join(into, entries[0])):
        return os.path.join(into, entries[0])
    return into


@dataclass(slots=True)
class Expanded:
    """The inputs a command line named, with its directories and tarballs looked into."""

    paths: list[str]
    #: per path given that was looked into: what was found in it, ``{"given", "found": [{path, kind, absolute}]}``
    found: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    _scratch: list[tempfile.TemporaryDirectory] = field(default_factory=list, repr=False)

    def cleanup(self) -> None:
        for scratch in self._scratch:
            scratch.cleanup()
        self._scratch.clear()

    def __enter__(self) -> Expanded:
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


def expand_inputs(paths: Sequence[str]) -> Expanded:
    """Each directory (not itself a cluster dir) or tarball in ``paths`` replaced by the inputs
    `discover` finds in it (as one incident); files and cluster dirs kept as given.  A tarball is
    extracted to a temporary directory that lives until `Expanded.cleanup` (or the ``with`` block ends)."""
    expanded = Expanded([])
    for given in paths:
        if not is_container(given):
            expanded.paths.append(os.fspath(given))
            continue
        root = os.fspath(given)
        if is_tarball(root):
            scratch = tempfile.TemporaryDirectory(prefix="recount-incident-")
            expanded._scratch.append(scratch)
            try:
                root = unpack(root, scratch.name)
            except (tarfile.TarError, OSError) as error:
                expanded.cleanup()
                raise ValueError(f"{given}: cannot unpack ({error}); expected a .tar.gz of an incident directory"
                                 ) from None
        incidents = discover([root], incident_depth=0)
        inputs = [i for incident in incidents for i in incident.inputs]
        if not inputs:
            expanded.cleanup()
            raise ValueError(f"{given}: no captures, agent logs, cluster directories or JSON Lines found in it")
        expanded.paths += [i.path for i in inputs]
        expanded.found.append({"given": os.fspath(given),
                               "found": [{"path": _relative(i.path, root), "kind": i.kind, "absolute": i.path}
                                         for i in inputs]})
        expanded.notes += [note.replace(root + os.sep, "") for incident in incidents for note in incident.notes]
    return expanded


def _relative(path: str, root: str) -> str:
    relative = os.path.relpath(path, root)
    return os.path.basename(os.path.abspath(root)) if relative == "." else relative


def distinct_inputs(paths: Sequence[str]) -> tuple[list[str], list[str]]:
    """``paths`` without repeats: the same file or directory by another path, or a file byte-identical
    to an earlier one (a capture copied twice).  Returns the inputs kept, in order, and a note per input dropped."""
    kept: list[str] = []
    notes: list[str] = []
    by_real: dict[str, str] = {}
    files = [os.path.realpath(p) for p in paths if os.path.isfile(p)]
    sizes = [os.path.getsize(p) for p in files]
    shared_sizes = {size for size in sizes if sizes.count(size) > 1}  # only these are worth hashing
    by_content: dict[tuple[int, str], str] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real in by_real:
            notes.append(f"{path}: given twice (as {by_real[real]}); read once")
            continue
        by_real[real] = os.fspath(path)
        if os.path.isfile(real) and os.path.getsize(real) in shared_sizes:
            digest = (os.path.getsize(real), _sha256(real))
            if digest in by_content:
                notes.append(f"{path}: the same bytes as {by_content[digest]}; read once")
                continue
            by_content[digest] = os.fspath(path)
        kept.append(os.fspath(path))
    return kept, notes


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
