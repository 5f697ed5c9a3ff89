"""`recount record`: run the recording proxy in front of a live cluster until stopped."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from cli import output
from cli.errors import UserError
from recorder.record.proxy import ProxyError, RecordingProxy, RecordingSummary

EPILOG = (
    "Examples:\n\n"
    "  recount record --members '0,h0:9002,h0:9003,h0:9004,h0:9005,h0:9001|1,...' --out rec/ "
    "--listen-host 10.0.0.9 --base-port 30000\n\n"
    "(then start member N with the members string printed for member N; Ctrl-C stops the recording)\n\n"
    '  recount record --members "$MEMBERS" --out rec/ --json | head -1 | jq .memberClusterMembers\n\n'
    'With --json, stdout is JSON Lines: a {"kind":"proxy"} line as soon as the proxy listens (the '
    'members strings to give the cluster, the proxied endpoints), and a {"kind":"summary"} line when '
    "it stops.  The recording is out/recording.arrows, an Arrow IPC stream (DuckDB and pyarrow read it)."
)


def register(app: typer.Typer) -> None:
    app.command("record", epilog=EPILOG)(record)


def record(
    members: Annotated[
        str,
        typer.Option(
            "--members",
            help="The cluster's aeron.cluster.members string, as the members have it now.",
            show_default=False,
        ),
    ],
    out: Annotated[
        str,
        typer.Option(
            "--out", help="Directory for recording.arrows (created if missing).", show_default=False
        ),
    ],
    ingress: Annotated[
        bool, typer.Option("--ingress", help="Also proxy and record each member's ingress endpoint.")
    ] = False,
    listen_host: Annotated[
        str,
        typer.Option(
            "--listen-host", help="Address the proxy listens on; members and clients must reach it."
        ),
    ] = "127.0.0.1",
    base_port: Annotated[
        int,
        typer.Option(
            "--base-port",
            help="First proxy port; the rest follow in member then channel order. "
            "0 = free ports chosen by the system.",
        ),
    ] = 0,
    flush_ms: Annotated[
        int,
        typer.Option("--flush-ms", min=1, max=60_000, help="Write what was received at least this often."),
    ] = 100,
    fsync: Annotated[
        bool, typer.Option("--fsync", help="fsync after every flush (survives a machine crash).")
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing recording in --out.")] = False,
    duration: Annotated[
        float | None,
        typer.Option(
            "--duration", min=0.0, help="Stop after this many seconds (default: on Ctrl-C/SIGTERM)."
        ),
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="JSON Lines on stdout (see below).")] = False,
) -> int:
    """Record a live cluster's consensus and log traffic through a UDP proxy, crash-safe."""
    channels = ("consensus", "log", "ingress") if ingress else ("consensus", "log")
    try:
        proxy = RecordingProxy(members, channels=channels, listen_host=listen_host, base_port=base_port)
    except ProxyError as error:
        raise UserError(str(error)) from None
    with proxy:
        try:
            recording = proxy.create_recording(out, force=force, fsync=fsync)
        except ProxyError as error:
            raise UserError(str(error)) from None

        def announce() -> None:
            if json_output:
                output.print_json_line(proxy.describe_json(recording.path))
                sys.stdout.flush()  # a script waits for this line before starting the cluster
            else:
                _print_plan(proxy, recording.path, flush_ms)

        if proxy.listens_beyond_this_host:
            _warn(f"listening on {proxy.listen_ip}, not a loopback address: anything that reaches these ports "
                  "from the network is forwarded to the cluster's members")
        summary = proxy.run(
            recording, flush_ms=flush_ms, duration_s=duration, on_ready=announce, on_warning=_warn
        )
    if json_output:
        output.print_json_line(summary.to_json())
    else:
        output.stdout.print(summary.describe(), markup=False)
    return _exit_status(summary)


def _warn(message: str) -> None:
    sys.stderr.write(f"recount record: warning: {message}\n")
    sys.stderr.flush()


def _print_plan(proxy: RecordingProxy, path: str, flush_ms: int) -> None:
    out = output.stdout
    out.print("Give each member its own aeron.cluster.members:", markup=False)
    for member_id, text in sorted(proxy.member_cluster_members().items()):
        out.print(f"  member {member_id}: {text}", markup=False)
    out.print(f"Tools and clients outside the cluster: {proxy.proxied_cluster_members()}", markup=False)
    ingress = proxy.ingress_endpoints()
    if ingress is not None:
        out.print(f"Clients' aeron.cluster.ingress.endpoints: {ingress}", markup=False)
    for endpoint in proxy.endpoints:
        out.print(
            f"  member {endpoint.member_id} {endpoint.channel}: {endpoint.proxy} -> {endpoint.member}",
            markup=False,
        )
    buffers = proxy.socket_buffers
    out.print(
        f"Socket buffers: receive {buffers['receive'] / 2**20:.1f} MiB, send {buffers['send'] / 2**20:.1f} MiB "
        f"(asked {buffers['asked'] / 2**20:.0f} MiB); reading with {proxy.socket_io}",
        markup=False,
    )
    sys.stdout.flush()
    if buffers["receive"] < buffers["asked"]:
        _warn(f"the kernel clamped the receive buffers to {buffers['receive'] / 2**20:.1f} MiB (asked "
              f"{buffers['asked'] / 2**20:.0f} MiB; raise net.core.rmem_max, or run with CAP_NET_ADMIN): a busy "
              "host starving the proxy of CPU overflows them sooner")
    output.stderr.print(
        f"recording {' and '.join(proxy.channels)} to {path} (flushed every {flush_ms} ms); "
        "stop with Ctrl-C or SIGTERM",
        markup=False,
    )


def _exit_status(summary: RecordingSummary) -> int:
    if summary.error is None:
        return 0
    kept = f"recording stopped, {summary.recorded} datagrams written before it, {summary.lost} lost"
    if isinstance(summary.error, OSError):
        # The disk's fault, not ours: one line, and what was flushed before it stays readable.
        reason = summary.error.strerror or str(summary.error)
        sys.stderr.write(f"recount: {summary.path}: {reason}; {kept}\n")
        return 2
    if isinstance(summary.error, ProxyError):
        sys.stderr.write(f"recount: {summary.error}; {kept}\n")
        return 2
    sys.stderr.write(f"recount: internal error while writing {summary.path}: {summary.error!r}\n")
    return 1
