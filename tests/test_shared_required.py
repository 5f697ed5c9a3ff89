"""CI cannot skip the evidence (issue 14 item 5): with ``RECOUNT_REQUIRE_SHARED=1`` (set by `.ci/run`)
a test that needs ``../shared`` fails when it is missing; without it (a user's clone) it skips and
says why.  Each case is a pytest run in a subprocess, with the shared directory pointed elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PROBE = '''
def test_needs_the_real_capture(capture):
    assert (capture / "node0").is_dir()

def test_needs_the_schemas(schemas):
    assert schemas.is_dir()
'''


def _pytest(tmp_path: Path, shared: Path, require: str | None) -> subprocess.CompletedProcess:
    probe = tmp_path / "test_probe.py"
    probe.write_text(PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("RECOUNT_REQUIRE_SHARED", "RECOUNT_SHARED")}
    env["RECOUNT_SHARED"] = str(shared)
    if require is not None:
        env["RECOUNT_REQUIRE_SHARED"] = require
    # The project's conftest as a plugin: its fixtures, outside tests/ (no other conftest applies).
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-rs", "-q",
         "--rootdir", str(tmp_path), str(probe)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )


def test_a_users_clone_without_shared_skips_with_the_reason(tmp_path):
    result = _pytest(tmp_path, tmp_path / "no-shared-here", require=None)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 skipped" in result.stdout
    assert f"Aeron reference material not found at {tmp_path / 'no-shared-here'}" in result.stdout
    assert "it sits beside the checkout in CI only" in result.stdout


@pytest.mark.parametrize("require", ["0", ""])
def test_a_zero_or_empty_variable_still_skips(tmp_path, require):
    result = _pytest(tmp_path, tmp_path / "no-shared-here", require=require)
    assert result.returncode == 0 and "2 skipped" in result.stdout, result.stdout


def test_ci_with_recount_require_shared_fails_when_shared_is_missing(tmp_path):
    result = _pytest(tmp_path, tmp_path / "no-shared-here", require="1")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "2 error" in result.stdout and "skipped" not in result.stdout
    assert "RECOUNT_REQUIRE_SHARED is set (CI must not skip the tests on real captures)" in result.stdout


def test_ci_with_shared_present_runs_the_tests(tmp_path):
    capture = tmp_path / "shared" / "reference" / "aeron-1.47.3-capture" / "a_clean_start" / "node0"
    capture.mkdir(parents=True)
    (tmp_path / "shared" / "reference" / "aeron-schemas").mkdir()
    result = _pytest(tmp_path, tmp_path / "shared", require="1")
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout


def test_ci_script_sets_the_variable_before_running_the_tests():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    exported = [i for i, line in enumerate(script) if line.startswith("export RECOUNT_REQUIRE_SHARED=1")]
    runs = [i for i, line in enumerate(script) if line.strip().startswith("python -m pytest")]
    assert exported and runs and exported[0] < runs[0]
