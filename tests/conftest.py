"""Shared test fixtures.

Tests that read Aeron's reference material (`../shared/reference` beside the checkout, as in CI)
use the `reference` or `capture` fixtures; on a user's clone without it they skip and say why.
CI sets ``RECOUNT_REQUIRE_SHARED=1`` (`.ci/run`): there a missing reference is a failure, so the
evidence from Aeron's real captures cannot be skipped quietly.  ``RECOUNT_SHARED`` points elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist's workers (`-n`, pyproject's addopts) start with COLUMNS=80 and LINES=24 in their
    # environment, which a serial run does not have; the commands' output width (`cli.output`, set as it
    # is imported) must be the same either way: the serial run's, stdout not a terminal.
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


def _shared_dir() -> Path:
    configured = os.environ.get("RECOUNT_SHARED")
    return Path(configured) if configured else ROOT.parent / "shared"


SHARED = _shared_dir()
REFERENCE = SHARED / "reference"
CAPTURE = REFERENCE / "aeron-1.47.3-capture" / "a_clean_start"
SCHEMAS = REFERENCE / "aeron-schemas"


#: Set (to anything but "" or "0") where the reference material must be there: in CI.
REQUIRE_SHARED = os.environ.get("RECOUNT_REQUIRE_SHARED", "") not in ("", "0")


def _require(path: Path) -> Path:
    if not path.exists():
        if REQUIRE_SHARED:
            pytest.fail(f"Aeron reference material not found at {path}, and RECOUNT_REQUIRE_SHARED is set "
                        "(CI must not skip the tests on real captures)", pytrace=False)
        pytest.skip(f"Aeron reference material not found at {path} (it sits beside the checkout in CI only)")
    return path


@pytest.fixture(scope="session")
def reference() -> Path:
    """`../shared/reference`: the schemas, notes and real files from Aeron."""
    return _require(REFERENCE)


@pytest.fixture(scope="session")
def schemas() -> Path:
    return _require(SCHEMAS)


@pytest.fixture(scope="session")
def capture() -> Path:
    """The real 3-member Aeron 1.47.3 cluster's leftovers (pcap, agent logs, cluster dirs)."""
    return _require(CAPTURE)


VERSIONS_CAPTURES = REFERENCE / "aeron-versions-capture"


@pytest.fixture(scope="session")
def versions_captures() -> Path:
    """The real captures of other Aeron versions (`v<version>_<scenario>/`) and their schema XMLs."""
    return _require(VERSIONS_CAPTURES)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """With pytest-xdist (`-n`), the Spark tests run in one worker, so that they share its one Spark
    session (`tests.spark_session.shared_spark`) instead of starting one per worker."""
    for item in items:
        if item.get_closest_marker("spark") is not None or item.path.name == "test_spark.py":
            item.add_marker(pytest.mark.xdist_group("spark"))
