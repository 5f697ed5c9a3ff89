"""`recount record`: a live UDP recording proxy for a test or staging cluster.

Theory of operation: the proxy (`proxy`) stands in front of each member's consensus and log (and,
on request, ingress) endpoints, forwards every datagram unchanged in both directions and hands each
one, with its receive time and original endpoints, to a writer thread (`storage`) that appends whole
Arrow record batches to an IPC stream file every flush interval, so a recorder killed at any moment
leaves a readable file holding everything up to its last flush.  `batch_io` moves many datagrams per
system call on Linux (recvmmsg/sendmmsg through ctypes; the proxy falls back to recvfrom/sendto).  `members` parses and rewrites the
members string the cluster is given; `reader` reads a recording back as `Datagram`s, the same shape
the pcap importer produces, for the shared datagram decoder.

This package does I/O (sockets, files, signals, one writer thread).  It imports `formats` and
`engine.model.members`; only `cli` imports it.
"""
