"""Bulk conversion on Spark: the ``aeron-capture`` data source and the per-incident replay-file job.

Theory of operation.  `datasource` turns directories of captures into Spark rows: it finds the
inputs, groups them into incidents (one directory per incident by default), plans partitions (per
file, big classic pcaps cut at record boundaries with a warm-up; or per incident) and decodes each
partition with the same importers the local converter uses (`recorder.capture`, `recorder.convert`).
`job` runs ``recount convert --engine spark``: one task per incident decodes its inputs exactly as the
local converter does, writes the incident's replay file aside and renames it into place, and the
driver writes a Parquet catalog of what was converted.  Like the rest of `recorder` this package does
I/O; it imports `formats` and other `recorder` modules, never `cli`.  pyspark is imported only where
a Spark session is needed, so the decoding functions also run without one (the local bulk engine).
"""
