"""Byte-exact codecs for what Aeron Cluster writes, and recount's own replay file.

Theory of operation: every module here turns bytes or text into frozen values and back, exactly as
Aeron 1.47.3 writes them, and does no I/O of its own (callers open, read and write files).  Bad input
raises `formats.errors.DecodeError`, naming the source, the byte offset (or line) and what was
expected, and nothing else.  `formats` imports nothing else of recount's; `engine`, `recorder` and
`cli` build on it.

- `sbe`, `cluster_codecs`: SBE framing and the 54 messages of the cluster schema (111 v12).
- `recording_log`, `node_state`, `mark_file`: a member's cluster-directory files.
- `udp`, `reassembly`, `pcap`, `agent_log`: transport frames, captures and aeron-agent logs.
- `events`, `replay_file`, `describe`: recount's event model, its Arrow file and one-line descriptions;
  `event_columns`: events held as columns, and the replay file written from them a batch at a time.
"""
