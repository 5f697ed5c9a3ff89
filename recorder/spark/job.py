"""``recount convert --engine spark DIR... --out-dir OUT``: one replay file per incident, and a catalog.

Theory of operation.

1. The driver finds the incidents under the given directories (`recorder.discovery.discover`: one directory
   per incident by default, ``incident_depth`` / ``group_by`` to change it) and the replay file each
   one gets: ``OUT/<incident>.arrow``.  An incident whose replay file exists is skipped (its catalog
   rows are kept) unless ``force``.
2. Each remaining incident is one Spark task (``sc.parallelize(incidents, len(incidents))``).  The task
   runs the local converter itself (`recorder.convert.convert`, which decodes the inputs together and
   assembles the table with `formats.replay_file.events_to_table`), so the file is exactly what
   ``recount convert <inputs> -o X`` writes; it is written into this run's staging directory
   (``OUT/.recount-staging-<driver pid>-<random>/``, same file system) and renamed into place, so a
   replay file is never seen half-written under its name.  A task killed mid-write (its worker died,
   the job was interrupted) leaves its partial file in the staging directory, which the driver removes
   when the job ends, however it ends; one left by a driver that was itself killed is removed by the
   next run.  Spark retries a task whose worker died (``local[N,F]`` allows F attempts; the default
   master is ``local[*,4]``, as a cluster's ``spark.task.maxFailures``), and the retry writes the same
   bytes.  It returns the incident's catalog rows, not its events, so nothing large goes through the
   driver.  An input that cannot be read fails its incident only (status ``failed``, its error in the
   catalog), never the job.

   Replay file names come from incident names, which come from directory names: each ``/``-separated
   part is reduced to ``[A-Za-z0-9._+-]`` (anything else becomes ``_``; a leading dot too, so ``..``
   and hidden names cannot occur); a name that had to change, or that equals another incident's but
   for case (case-insensitive file systems), gets ``-<8 hex digits of its SHA-1>`` so that no two incidents share a file and none lands outside ``OUT``
   (`replay_file_names`).  The catalog keeps the incident's own name beside its file's.

   Why one task per incident and not per file: an incident's captures are decoded together (one
   host's capture says which member a publication belongs to for another's; a member's events come
   from its own host's capture; agent logs are aligned on the captures).  Splitting that across tasks
   would make the output depend on the split, and it must equal the local converter's.  Parallelism
   comes from the number of incidents; `datasource`'s ``file`` split is the way to spread one huge
   capture over many cores for exploration.
3. While the tasks run (a driver thread submits them), the driver polls ``sc.statusTracker()`` and
   reports finished/total tasks to ``progress``.
4. The driver writes the catalog, each file aside then renamed: ``OUT/catalog/incidents.parquet``
   (one row per incident: status, replay file, inputs, bytes, events, members, clusterMembers, time
   range, event counts by type, error count), ``members.parquet`` (incident, node, events, firstTs,
   lastTs) and ``errors.parquet`` (incident, sourceFile, category, detail, packet, offset, line).
   DuckDB reads them as they are: ``SELECT * FROM 'OUT/catalog/incidents.parquet'``.

``engine="local"`` runs the same tasks one after the other in this process, without Spark.

Processes.  When `convert_bulk` started the Spark session itself (not under spark-submit, no session
passed in), it stops it when the job ends, done, failed or interrupted (Ctrl-C): the job is cancelled,
the session stopped, the JVM it launched shut down and waited for, and any process it started that
is still alive then (a Python worker, Linux only) is killed, so nothing it started outlives it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from formats.errors import DecodeError
from recorder.spark import datasource

#: All cores, and up to 4 attempts per task (in local mode Spark retries only with local[N,F]).
DEFAULT_MASTER = "local[*,4]"
CATALOG_DIR = "catalog"
REPLAY_SUFFIX = ".arrow"
POLL_SECONDS = 0.2

INCIDENTS_SCHEMA = pa.schema([
    pa.field("incident", pa.string()),
    pa.field("status", pa.string()),  # converted, skipped (converted by an earlier run) or failed
    pa.field("replayFile", pa.string()),  # relative to the output directory
    pa.field("inputs", pa.list_(pa.string())),
    pa.field("inputBytes", pa.int64()),
    pa.field("events", pa.int64()),
    pa.field("members", pa.list_(pa.int32())),
    pa.field("clusterMembers", pa.string()),
    pa.field("firstTs", pa.int64()),
    pa.field("lastTs", pa.int64()),
    pa.field("eventTypes", pa.map_(pa.string(), pa.int64())),
    pa.field("errors", pa.int64()),
])
MEMBERS_SCHEMA = pa.schema([
    pa.field("incident", pa.string()),
    pa.field("node", pa.int32()),
    pa.field("events", pa.int64()),
    pa.field("firstTs", pa.int64()),
    pa.field("lastTs", pa.int64()),
])
ERRORS_SCHEMA = datasource.ERRORS_ARROW_SCHEMA


@dataclass(frozen=True, slots=True)
class BulkResult:
    out_dir: str
    engine: str
    master: str | None
    incidents: list[dict[str, Any]]  #: the catalog's incident rows, sorted by incident
    failures: list[dict[str, Any]]  #: the error rows of the failed incidents (why they failed)

    @property
    def failed(self) -> int:
        return sum(1 for row in self.incidents if row["status"] == "failed")

    def to_json(self) -> dict[str, Any]:
        counts = Counter(row["status"] for row in self.incidents)
        return {
            "outDir": self.out_dir,
            "engine": self.engine,
            "master": self.master,
            "catalog": os.path.join(self.out_dir, CATALOG_DIR),
            "converted": counts.get("converted", 0),
            "skipped": counts.get("skipped", 0),
            "failed": counts.get("failed", 0),
            "events": sum(row["events"] or 0 for row in self.incidents if row["status"] == "converted"),
            "incidents": [{**row, "eventTypes": dict(row["eventTypes"] or [])} for row in self.incidents],
            "failures": self.failures,
        }


# --- Spark session ---------------------------------------------------------------------------------
def spark_session(master: str | None = None, conf: Mapping[str, str] | None = None):
    """A Spark session for recount: no UI, no console progress bar, our data sources registered.

    ``master`` None means the one spark-submit was given when it launched us, else `DEFAULT_MASTER`.
    Nothing is downloaded (no ``spark.jars.packages``), so it works offline.  Python workers run this
    interpreter unless PYSPARK_PYTHON says otherwise, so they find recount where the driver does.
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit
        master = DEFAULT_MASTER
    builder = SparkSession.builder.master(master) if master else SparkSession.builder
    builder = (
        builder
        .appName("recount convert")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
    )
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # we launch the JVM: keep its INFO/WARN chatter off stderr
        builder = builder.config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_quiet_log4j()}")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    datasource.register(spark)
    return spark


_QUIET_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
# A job cancelled by Ctrl-C: a killed task's completion listener can race the block manager's own
# clean-up and log "Error in TaskCompletionListener ... Block broadcast_N does not exist". Harmless,
# and recount reports every task's outcome itself: not shown.
logger.taskcontext.name = org.apache.spark.TaskContextImpl
logger.taskcontext.level = off
"""


def _quiet_log4j() -> str:
    """A log4j2 configuration showing only errors, written once to the temporary directory."""
    import tempfile

    path = Path(tempfile.gettempdir()) / f"recount-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != _QUIET_LOG4J:
        temporary = path.with_name(f"{path.name}.tmp-{os.getpid()}")
        temporary.write_text(_QUIET_LOG4J)
        os.replace(temporary, path)
    return str(path)


def parse_conf(pairs: Sequence[str]) -> dict[str, str]:
    """``["k=v", ...]`` → ``{k: v}``; a pair without ``=`` is a ValueError naming it."""
    conf: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: expected KEY=VALUE")
        conf[key.strip()] = value
    return conf


# --- one incident ----------------------------------------------------------------------------------
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")
#: Longest part of a replay file's path kept from an incident's name (file systems allow 255 bytes).
MAX_NAME_PART = 120


def _safe_part(part: str) -> str:
    safe = _UNSAFE.sub("_", part)
    safe = "_" * (len(safe) - len(safe.lstrip("."))) + safe.lstrip(".")  # no "..", no hidden files
    return safe[:MAX_NAME_PART] or "_"


def replay_file_names(names: Sequence[str]) -> dict[str, str]:
    """Each incident name's replay file, relative to the output directory ("/"-separated), such that
    none leaves the directory and no two collide (see the module docstring)."""

    def plain(name: str) -> str:
        return "/".join(_safe_part(part) for part in name.split("/")) + REPLAY_SUFFIX

    def hashed(name: str) -> str:
        *parents, last = plain(name)[: -len(REPLAY_SUFFIX)].split("/")
        digest = hashlib.sha1(name.encode("utf-8", "surrogateescape")).hexdigest()[:8]
        return "/".join([*parents, f"{last}-{digest}"]) + REPLAY_SUFFIX

    files = {name: plain(name) if plain(name) == name + REPLAY_SUFFIX else hashed(name) for name in names}
    by_file: dict[str, list[str]] = {}
    for name, file in files.items():
        by_file.setdefault(file.casefold(), []).append(name)
    for group in by_file.values():
        if len(group) > 1:  # names equal but for case: each its own file on a case-insensitive disk too
            for name in group:
                files[name] = hashed(name)
    seen: dict[str, str] = {}
    for name, file in files.items():
        other = seen.setdefault(file.casefold(), name)
        if other != name:
            raise ValueError(f"incidents {other!r} and {name!r} would share the replay file {file}")
    return files


def convert_incident(task: Mapping[str, Any]) -> dict[str, Any]:
    """Convert one incident into its replay file, atomically, and return its catalog rows (runs in a task).

    ``task``: ``incident``, ``inputs`` (paths, in order), ``inputBytes``, ``target`` (the replay
    file), ``relative`` (its name in the catalog), ``members`` (or None), ``staging`` (the run's
    staging directory, beside the target's), ``attempt`` (for the temporary file's name).  The file is
    written by the local converter itself (`datasource.convert_incident_file`) into the staging
    directory, then renamed over the target.
    """
    incident = task["incident"]
    row = _failed_row(datasource.Incident(incident, "", ()), 0)
    row.update(inputs=list(task["inputs"]), inputBytes=task["inputBytes"])
    target = Path(task["target"])
    staging = Path(task.get("staging") or target.parent)
    temporary = staging / f".{target.name}.tmp-{os.getpid()}-{task.get('attempt', 0)}"
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir(parents=True, exist_ok=True)
        try:
            result = datasource.convert_incident_file(task["inputs"], temporary, members=task.get("members"))
            ts, nodes, types = _columns(temporary)
            os.replace(temporary, target)
        finally:
            if temporary.exists():
                temporary.unlink()
    except (DecodeError, OSError) as error:
        row["errors"] = 1
        return {"incident": row, "members": [], "errors": [_error_row(incident, datasource.failure_row(error, None))]}
    problems = (result.get("capture") or {}).get("problems", [])
    by_node = _times_by_node(nodes, ts)
    row.update(
        status="converted",
        replayFile=task["relative"],
        events=len(ts),
        members=sorted(by_node),
        clusterMembers=result.get("clusterMembers"),
        firstTs=min(ts, default=None),
        lastTs=max(ts, default=None),
        eventTypes=sorted(Counter(types).items()),
        errors=len(problems),
    )
    return {"incident": row, "members": _member_rows(incident, by_node),
            "errors": [_error_row(incident, p) for p in problems]}


def _failed_row(incident: datasource.Incident, errors: int) -> dict[str, Any]:
    return {"incident": incident.name, "status": "failed", "replayFile": None, "inputs": incident.paths,
            "inputBytes": incident.size, "events": None, "members": None, "clusterMembers": None,
            "firstTs": None, "lastTs": None, "eventTypes": None, "errors": errors}


def _columns(path: str | os.PathLike[str]) -> tuple[list[int], list[int], list[str]]:
    """ts, node and type of every row of a replay file."""
    from formats import replay_file

    with pa.memory_map(str(path), "r") as source:
        table = replay_file.read_table(source, name=str(path))
        return (table.column("ts").to_pylist(), table.column("node").to_pylist(),
                table.column("type").cast(pa.string()).to_pylist())


def _times_by_node(nodes: list[int], ts: list[int]) -> dict[int, list[int]]:
    by_node: dict[int, list[int]] = {}
    for node, moment in zip(nodes, ts, strict=True):
        by_node.setdefault(node, []).append(moment)
    return by_node


def _member_rows(incident: str, by_node: dict[int, list[int]]) -> list[dict[str, Any]]:
    return [{"incident": incident, "node": node, "events": len(times), "firstTs": min(times), "lastTs": max(times)}
            for node, times in sorted(by_node.items())]


def _error_row(incident: str, problem: Mapping[str, Any]) -> dict[str, Any]:
    return {"incident": incident, "sourceFile": problem.get("file"), "category": problem.get("category"),
            "detail": problem.get("detail"), "packet": problem.get("packet"), "offset": problem.get("offset"),
            "line": problem.get("line")}


def _convert_partition(index: int, tasks):
    """Spark's side: convert the incidents of one partition (one each, as planned)."""
    for task in tasks:
        yield json.dumps(convert_incident({**task, "attempt": index}))


# --- the job ---------------------------------------------------------------------------------------
def convert_bulk(
    paths: Sequence[str],
    out_dir: str | os.PathLike[str],
    *,
    engine: str = "spark",
    master: str | None = None,
    conf: Mapping[str, str] | None = None,
    incident_depth: int = 1,
    group_by: str = "directory",
    members: str | None = None,
    force: bool = False,
    progress: Callable[[int, int], None] | None = None,
    spark: Any = None,
) -> BulkResult:
    """Convert every incident under ``paths`` into ``out_dir`` (see the module docstring)."""
    if engine not in ("spark", "local"):
        raise ValueError(f"engine must be 'spark' or 'local', not {engine!r}")
    incidents = datasource.discover(paths, incident_depth=incident_depth, group_by=group_by)
    if not incidents:
        raise DecodeError("no captures found (pcap, pcapng, agent logs, cluster directories or *.jsonl)",
                          source=", ".join(paths))
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(20, "exists and is not a directory", str(out))
    out.mkdir(parents=True, exist_ok=True)
    previous = _read_catalog(out)
    files = replay_file_names([incident.name for incident in incidents])
    _remove_abandoned_staging(out)
    staging = out / f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    tasks, kept = [], []
    for incident in incidents:
        relative = files[incident.name]
        target = out.joinpath(*relative.split("/"))
        if target.exists() and not force:
            try:
                kept.append(_skipped(incident, relative, target, previous))
            except (DecodeError, OSError) as error:
                failure = {**datasource.failure_row(error, str(target)),
                           "detail": f"{target}: the replay file of an earlier run cannot be read"
                                     f" ({error}); convert again with --force"}
                kept.append({"incident": _failed_row(incident, 1), "members": [],
                             "errors": [_error_row(incident.name, failure)]})
            continue
        tasks.append({"incident": incident.name, "inputs": incident.paths, "inputBytes": incident.size,
                      "target": str(target), "relative": relative, "members": members,
                      "staging": str(staging)})
    if progress is not None:
        progress(0, len(tasks))
    try:
        if not tasks:
            results = []
        elif engine == "local":
            results = []
            for done, task in enumerate(tasks, start=1):
                results.append(convert_incident(task))
                if progress is not None:
                    progress(done, len(tasks))
        elif spark is not None:
            master = spark.sparkContext.master
            results = [json.loads(text) for text in _run_spark(spark, tasks, progress)]
        else:
            with _owned_session(master, conf) as session:
                master = session.sparkContext.master
                results = [json.loads(text) for text in _run_spark(session, tasks, progress)]
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # what killed or interrupted tasks left half-written
    rows = sorted([r["incident"] for r in results] + [k["incident"] for k in kept], key=lambda r: r["incident"])
    member_rows = [m for r in results + kept for m in r["members"]]
    error_rows = [e for r in results + kept for e in r["errors"]]
    _write_catalog(out, rows, member_rows, error_rows)
    failed = {row["incident"] for row in rows if row["status"] == "failed"}
    failures = [e for e in error_rows if e["incident"] in failed]
    return BulkResult(str(out), engine, master if engine == "spark" and tasks else None, rows, failures)


def _run_spark(spark: Any, tasks: list[dict[str, Any]], progress: Callable[[int, int], None] | None) -> list[str]:
    context = spark.sparkContext
    group = f"recount-convert-{os.getpid()}-{id(tasks)}"
    outcome: dict[str, Any] = {}

    def submit() -> None:
        try:
            # Job groups are per thread: set it in the thread that runs the job.
            context.setJobGroup(group, "recount convert", interruptOnCancel=True)
            rdd = context.parallelize(tasks, len(tasks)).mapPartitionsWithIndex(_convert_partition)
            outcome["rows"] = rdd.collect()
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread below
            outcome["error"] = error

    # Ctrl-C: pyspark's own handler raises KeyboardInterrupt wherever the main thread is, often inside
    # a py4j call, which then logs tracebacks and breaks its connection.  Ours only notes it; the loop
    # below cancels the job and raises between calls.
    interrupted = threading.Event()
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGINT, lambda _signum, _frame: interrupted.set())
    try:
        thread = threading.Thread(target=submit, name="recount-spark-job", daemon=True)
        thread.start()
        _follow(context, group, thread, len(tasks), progress, interrupted)
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
    if "error" in outcome:
        raise outcome["error"]
    if progress is not None:
        progress(len(tasks), len(tasks))
    return outcome["rows"]


def _follow(context: Any, group: str, thread: threading.Thread, total: int,
            progress: Callable[[int, int], None] | None, interrupted: threading.Event) -> None:
    """Wait for the job's thread, reporting finished tasks; on Ctrl-C cancel the job and raise."""
    tracker = context.statusTracker()
    last = -1
    while thread.is_alive():
        thread.join(POLL_SECONDS)
        if interrupted.is_set():
            context.cancelJobGroup(group)
            raise KeyboardInterrupt
        if progress is None:
            continue
        done = 0
        for job_id in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(job_id)
            for stage_id in job.stageIds if job is not None else ():
                stage = tracker.getStageInfo(stage_id)
                if stage is not None:
                    done += stage.numCompletedTasks
        if done != last:
            progress(min(done, total), total)
            last = done


# --- staging and processes -------------------------------------------------------------------------
STAGING_PREFIX = ".recount-staging-"


def _remove_abandoned_staging(out: Path) -> None:
    """Remove the staging directories of earlier runs whose driver is gone (killed mid-job)."""
    for entry in out.glob(f"{STAGING_PREFIX}*"):
        pid = entry.name[len(STAGING_PREFIX):].split("-")[0]
        if entry.is_dir() and pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class _owned_session:
    """A Spark session started for one job and, however the job ends, stopped with every process
    it started (see the module docstring)."""

    def __init__(self, master: str | None, conf: Mapping[str, str] | None) -> None:
        self._master, self._conf = master, conf
        self.session = None
        self._ours = False

    def __enter__(self):
        from pyspark import SparkContext

        # A context already running in this process (spark-submit's, a notebook's) is not ours to stop.
        self._ours = SparkContext._active_spark_context is None
        self.session = spark_session(self._master, self._conf)
        return self.session

    def __exit__(self, *exc_info) -> None:
        if self._ours:
            stop_spark(self.session)


def stop_spark(session: Any, timeout_s: float = 20.0) -> None:
    """Stop ``session`` and the JVM it launched, then kill whatever that JVM started (Python workers)
    that still lives."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)  # the JVM we launched (None under spark-submit)
    started = _descendants(process.pid) if process is not None else set()
    # Ctrl-C during the wait below must not leave the job half torn down: finish, then let it through.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if threading.current_thread() is threading.main_thread() \
        else None
    try:
        try:
            session.sparkContext.cancelAllJobs()
            session.stop()
        except Exception:  # noqa: BLE001 - a JVM already gone: what follows still cleans up
            pass
        if process is not None:
            started |= _descendants(process.pid)
        if gateway is not None:
            try:
                gateway.shutdown()
            except Exception:  # noqa: BLE001
                pass
            SparkContext._gateway = None
            SparkContext._jvm = None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()  # the gateway JVM exits when its stdin closes
            try:
                process.wait(timeout_s)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired: no more waiting
                process.kill()
                process.wait(5)
        deadline = time.monotonic() + 5
        while True:
            alive = {p for p in started if _same_process_alive(p)}
            if not alive or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        for pid, _ in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _descendants(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of every live descendant of ``root`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[tuple[int, str]]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return set()
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append((int(entry), fields[19]))
    found: set[tuple[int, str]] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child[0])
    return found


def _same_process_alive(process: tuple[int, str]) -> bool:
    pid, start = process
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[19] == start and fields[0] != "Z"


# --- the catalog -----------------------------------------------------------------------------------
def _read_catalog(out: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The previous run's catalog rows by incident (empty when there is none or it cannot be read)."""
    directory = out / CATALOG_DIR
    found: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in ("incidents", "members", "errors"):
        path = directory / f"{name}.parquet"
        if not path.exists():
            continue
        try:
            rows = pq.read_table(path).to_pylist()
        except (pa.ArrowInvalid, OSError):
            continue
        for row in rows:
            found.setdefault(row["incident"], {}).setdefault(name, []).append(row)
    return found


def _skipped(incident: datasource.Incident, relative: str, target: Path, previous: dict) -> dict[str, Any]:
    """The catalog rows of an incident converted by an earlier run (from its catalog, else its file)."""
    earlier = previous.get(incident.name, {})
    rows = earlier.get("incidents", [])
    if rows and rows[0]["status"] in ("converted", "skipped"):
        row = dict(rows[0])
        row.update(status="skipped", eventTypes=sorted(dict(row["eventTypes"] or []).items()))
        return {"incident": row, "members": earlier.get("members", []), "errors": earlier.get("errors", [])}
    ts, nodes, types = _columns(target)
    by_node = _times_by_node(nodes, ts)
    row = {"incident": incident.name, "status": "skipped", "replayFile": relative, "inputs": incident.paths,
           "inputBytes": incident.size, "events": len(ts), "members": sorted(by_node),
           "clusterMembers": _cluster_members(target), "firstTs": min(ts, default=None),
           "lastTs": max(ts, default=None), "eventTypes": sorted(Counter(types).items()), "errors": 0}
    return {"incident": row, "members": _member_rows(incident.name, by_node), "errors": []}


def _cluster_members(path: Path) -> str | None:
    from formats import replay_file

    with pa.memory_map(str(path), "r") as source:
        schema = pa.ipc.open_file(source).schema
    return replay_file.check_metadata(schema, name=str(path)).cluster_members


def _write_catalog(out: Path, incidents: list[dict], members: list[dict], errors: list[dict]) -> None:
    directory = out / CATALOG_DIR
    directory.mkdir(exist_ok=True)
    members = sorted(members, key=lambda r: (r["incident"], r["node"]))
    # Map values arrive as [key, value] lists when they went through JSON (from a Spark task).
    incidents = [{**r, "eventTypes": None if r["eventTypes"] is None else [tuple(p) for p in r["eventTypes"]]}
                 for r in incidents]
    for name, rows, schema in (("incidents", incidents, INCIDENTS_SCHEMA), ("members", members, MEMBERS_SCHEMA),
                               ("errors", errors, ERRORS_SCHEMA)):
        table = pa.Table.from_pylist(rows, schema=schema)
        target = directory / f"{name}.parquet"
        temporary = directory / f".{name}.parquet.tmp-{os.getpid()}"
        try:
            pq.write_table(table, temporary)
            os.replace(temporary, target)
        finally:
            if temporary.exists():
                temporary.unlink()
