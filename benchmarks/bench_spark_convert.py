"""Bulk conversion throughput: local single process vs Spark ``local[1]`` and ``local[*]``, and a 1 TB/day plan.

A corpus of at least ``--gigabytes`` (default 1) of classic pcaps is generated under a temporary
directory (deleted afterwards unless ``--keep``): ``--incident-mb``-sized captures of a 3-member
cluster on three hosts (`tests.spark_session.cluster_capture`: an election, then log traffic and
AppendPosition/CommitPosition heartbeats), one per incident directory.  The same bulk conversion
(`recorder.spark.job.convert_bulk`: every incident decoded by the local converter into its replay
file, plus the catalog) is then timed

1. ``local``: engine local, one process, incidents one after the other;
2. ``spark local[1]``: a Spark job with one core (the overhead of Spark itself);
3. ``spark local[*]``: a Spark job with every core (the scaling);

and, with ``--datasource``, ``spark.read.format("aeron-capture")`` with files split into
``--chunk-mb`` chunks (decoding only, rows counted).  Each figure is events/s and MB/s of pcap; the
Spark session start-up is timed apart.  Last, the plan for 1 TB/day on a real cluster, derived from
the measured per-core rate.

    python benchmarks/bench_spark_convert.py                      # >= 1 GB, a few minutes on 2 cores
    python benchmarks/bench_spark_convert.py --gigabytes 0.1 --json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from recorder.spark import job  # noqa: E402
from tests.spark_session import MEMBERS, cluster_capture  # noqa: E402

TB = 1_000_000_000_000
DAY_S = 86_400


def build_corpus(directory: Path, gigabytes: float, incident_mb: int) -> tuple[int, int]:
    """Incident directories of one pcap each, ≥ ``gigabytes`` in all: (incidents, bytes)."""
    # Two distinct captures written round-robin: generating every incident anew would take longer than
    # converting it, and the decoding cost does not depend on two incidents holding the same bytes.
    heartbeats = max(1, incident_mb * 1_000_000 // 7_300)
    bases = [cluster_capture(seed, heartbeats=heartbeats, log_term_length=16 << 20) for seed in range(2)]
    total, count = 0, 0
    target = int(gigabytes * 1_000_000_000)
    while total < target:
        data = bases[count % len(bases)]
        path = directory / f"incident-{count:04d}" / "host.pcap"
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
        total += len(data)
        count += 1
    return count, total


def timed_bulk(corpus: Path, out: Path, **options) -> tuple[float, int]:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    result = job.convert_bulk([str(corpus)], out, **options)
    elapsed = time.perf_counter() - start
    events = sum(row["events"] or 0 for row in result.incidents)
    if result.failed:
        raise SystemExit(f"{result.failed} incident(s) failed: see {out}/catalog/errors.parquet")
    return elapsed, events


def figures(name: str, seconds: float, events: int, size: int, cores: int) -> dict:
    return {"run": name, "cores": cores, "seconds": round(seconds, 2), "events": events,
            "eventsPerSecond": round(events / seconds), "megabytesPerSecond": round(size / seconds / 1e6, 2),
            "megabytesPerSecondPerCore": round(size / seconds / 1e6 / cores, 2)}


def plan(per_core_mb_s: float, incident_mb: float) -> dict:
    """1 TB/day on a real cluster: cores needed to keep up, and to finish a day's data in a batch window."""
    core_hours = TB / (per_core_mb_s * 1e6) / 3600
    windows = {}
    for hours in (24, 4, 1):
        cores = core_hours / hours
        executors = max(1, -(-int(cores + 0.999) // 4))
        windows[f"{hours}h"] = {"cores": round(cores, 1), "executors4cores": executors}
    return {
        "perCoreMegabytesPerSecond": round(per_core_mb_s, 2),
        "coreHoursPerTerabyte": round(core_hours, 1),
        "partitions": int(TB / (incident_mb * 1e6)),
        "taskSeconds": round(incident_mb / per_core_mb_s, 1),
        "windows": windows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gigabytes", type=float, default=1.0, help="corpus size (default 1)")
    parser.add_argument("--incident-mb", type=int, default=64, help="size of one incident's capture (default 64)")
    parser.add_argument("--datasource", action="store_true", help="also time the data source with split files")
    parser.add_argument("--chunk-mb", type=int, default=16, help="chunk size for --datasource (default 16)")
    parser.add_argument("--keep", action="store_true", help="keep the generated corpus and outputs")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args(argv)

    cores = os.cpu_count() or 1
    work = Path(tempfile.mkdtemp(prefix="recount-bench-spark-"))
    rows = []
    try:
        start = time.perf_counter()
        incidents, size = build_corpus(work / "captures", args.gigabytes, args.incident_mb)
        generated = time.perf_counter() - start
        corpus = work / "captures"
        log = sys.stderr
        print(f"corpus: {incidents} incidents, {size / 1e9:.2f} GB of pcap, generated in {generated:.0f} s",
              file=log)

        seconds, events = timed_bulk(corpus, work / "out-local", engine="local")
        rows.append(figures("local (1 process)", seconds, events, size, 1))
        print(rows[-1], file=log)

        start = time.perf_counter()
        spark = job.spark_session("local[1]")
        startup = time.perf_counter() - start
        seconds, events = timed_bulk(corpus, work / "out-spark1", engine="spark", spark=spark)
        rows.append(figures("spark local[1]", seconds, events, size, 1))
        print(rows[-1], file=log)
        spark.stop()

        spark = job.spark_session("local[*]")
        seconds, events = timed_bulk(corpus, work / "out-sparkN", engine="spark", spark=spark)
        rows.append(figures("spark local[*]", seconds, events, size, cores))
        print(rows[-1], file=log)
        same = all((work / "out-local" / f"incident-{i:04d}.arrow").read_bytes()
                   == (work / "out-sparkN" / f"incident-{i:04d}.arrow").read_bytes() for i in range(incidents))

        if args.datasource:
            start = time.perf_counter()
            count = (spark.read.format("aeron-capture").option("members", MEMBERS)
                     .option("chunkBytes", str(args.chunk_mb << 20)).option("warmupBytes", str(1 << 20))
                     .load(str(corpus)).count())
            rows.append(figures(f"data source, {args.chunk_mb} MiB chunks, local[*]", time.perf_counter() - start,
                                count, size, cores))
            print(rows[-1], file=log)
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)

    local, one, many = rows[0], rows[1], rows[2]
    per_core = one["megabytesPerSecond"]
    document = {
        "corpus": {"incidents": incidents, "bytes": size, "events": local["events"]},
        "sparkStartupSeconds": round(startup, 1),
        "runs": rows,
        "sparkOverheadOneCore": round(local["seconds"] / one["seconds"], 2),
        "speedupAllCores": round(many["megabytesPerSecond"] / one["megabytesPerSecond"], 2),
        "identicalOutputs": same,
        "plan1TBPerDay": plan(per_core, args.incident_mb),
    }
    if args.json:
        print(json.dumps(document))
        return 0
    print(f"corpus: {incidents} incidents, {size / 1e9:.2f} GB, {local['events']:,} events"
          f" (Spark session start-up {startup:.1f} s, not counted)")
    print(f"{'run':44} {'cores':>5} {'s':>7} {'events/s':>10} {'MB/s':>7} {'MB/s/core':>9}")
    for row in rows:
        print(f"{row['run']:44} {row['cores']:>5} {row['seconds']:>7.1f} {row['eventsPerSecond']:>10,}"
              f" {row['megabytesPerSecond']:>7.1f} {row['megabytesPerSecondPerCore']:>9.1f}")
    print(f"Spark local[1] runs at {document['sparkOverheadOneCore']:.0%} of the local engine's speed;"
          f" local[*] on {cores} cores is {document['speedupAllCores']:.2f}x local[1].  Replay files identical"
          f" between local and Spark: {same}.")
    p = document["plan1TBPerDay"]
    print(f"\n1 TB/day on a real cluster, at the measured {p['perCoreMegabytesPerSecond']} MB/s per core"
          f" ({p['coreHoursPerTerabyte']} core-hours per TB):")
    print(f"  partitions: one task per incident; at {args.incident_mb} MB per incident that is {p['partitions']:,}"
          f" tasks of ~{p['taskSeconds']} s each (split incidents larger than a few GB: a task is one core)")
    for window, need in p["windows"].items():
        print(f"  to convert a day's TB within {window:>3}: {need['cores']:>6} cores"
              f" = {need['executors4cores']} executors of 4 cores (add ~20% for stragglers and start-up)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
