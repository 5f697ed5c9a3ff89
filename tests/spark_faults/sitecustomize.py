"""Faults for the Spark tests, injected into the Python workers Spark starts (never into recount itself).

A test puts this directory on the workers' PYTHONPATH (through ``SparkContext.environment``, or the
environment of a ``recount convert`` subprocess) so that Python runs this module at start-up, before
any task.  It wraps the local converter, `recorder.convert.convert`, which every bulk-conversion task
calls to write an incident's replay file.  ``RECOUNT_TEST_FAULT`` says what goes wrong:

``die-once``
    The first call anywhere (the first to create ``$RECOUNT_TEST_FAULT_DIR/died``) writes the replay
    file, cuts it to half its size, and ends the worker process with ``os._exit`` — a worker killed
    in the middle of an incident, leaving a half-written file behind.  Later calls (Spark's retry)
    convert normally.
``hang``
    Every call writes ``$RECOUNT_TEST_FAULT_DIR/started-<pid>`` and sleeps for ten minutes: a task
    that is still running when the test interrupts the job.
"""

import os

_FAULT = os.environ.get("RECOUNT_TEST_FAULT")
_DIRECTORY = os.environ.get("RECOUNT_TEST_FAULT_DIR", "")

if _FAULT in ("die-once", "hang") and _DIRECTORY:
    import time

    from recorder import convert as _converter

    _convert = _converter.convert

    def _faulty_convert(inputs, out, *args, **kwargs):
        if _FAULT == "hang":
            with open(os.path.join(_DIRECTORY, f"started-{os.getpid()}"), "w") as marker:
                marker.write(str(out))
            time.sleep(600)
        try:
            fd = os.open(os.path.join(_DIRECTORY, "died"), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return _convert(inputs, out, *args, **kwargs)
        result = _convert(inputs, out, *args, **kwargs)
        size = os.path.getsize(out)
        os.truncate(out, size // 2)
        os.write(fd, f"{os.getpid()} {out} {size}\n".encode())
        os.close(fd)
        os._exit(3)
        return result

    _converter.convert = _faulty_convert
