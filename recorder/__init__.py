"""Getting traffic and on-disk state in: importers, the simulator, the proxy, Spark jobs.

Theory of operation: `recorder` is where recount does I/O.  It opens files, directories, sockets and
Spark sessions, hands the bytes to the pure codecs in `formats` (and events to the model in `engine`),
and names the file in every error it raises.  It may import `formats` and `engine`; only `cli` imports
it.  Nothing here decides what Aeron would do: that stays in `formats` and `engine`.
"""
