"""`recount simulate`: a deterministic whole-cluster simulator that writes what a real incident leaves.

Theory of operation.  A scenario (`scenario`, a small TOML file) names the cluster, the faults and
the seed.  `cluster.Simulation` runs N engine `Node`s on one virtual clock (`clock.Scheduler`); their
messages travel as genuine Aeron UDP traffic (`wire`: media drivers, publications, images, SETUP,
status messages, NAKs, heartbeats) through a seeded network with latency, loss, duplication and
partitions (`network`).  `outputs` writes the leftovers: a pcap per host, agent logs, each member's
cluster directory, the replay file of the events the simulator recorded, and a summary.

The engine never imports any of this: the simulated parts live at the edge, the engine is driven
through its public `Node` API exactly as `recount replay` drives it, so a replay of the incident's
replay file runs the same model on the same inputs.  Everything is a pure function of (scenario,
seed): the same inputs give byte-identical outputs.

This package does I/O only in `run_scenario_file` / `outputs.write_outputs`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from recorder.simulate.cluster import Simulation, SimulationResult, simulate
from recorder.simulate.outputs import OutputExistsError, check_free, render_files, write_outputs
from recorder.simulate.scenario import Scenario, ScenarioError, parse_scenario

__all__ = [
    "OutputExistsError",
    "Scenario",
    "ScenarioError",
    "Simulation",
    "SimulationResult",
    "SimulationRun",
    "check_free",
    "load_scenario",
    "parse_scenario",
    "run_scenario_file",
    "simulate",
]


@dataclass(frozen=True, slots=True)
class SimulationRun:
    result: SimulationResult
    files: dict[str, bytes]
    written: list[Path]


def load_scenario(path: str | Path) -> Scenario:
    """Read and parse a scenario file; `ScenarioError` (with the file name) when it is not one."""
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise ScenarioError(f"not UTF-8 text (byte {error.start})", source=str(path)) from None
    except FileNotFoundError:
        raise ScenarioError("no such file (expected a scenario, *.toml)", source=str(path)) from None
    except IsADirectoryError:
        raise ScenarioError("is a directory, expected a scenario file (*.toml)", source=str(path)) from None
    except OSError as error:
        raise ScenarioError(error.strerror or str(error), source=str(path)) from None
    return parse_scenario(text, source=str(path))


def run_scenario_file(
    path: str | Path,
    out_dir: str | Path,
    *,
    seed: int | None = None,
    force: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> SimulationRun:
    """Simulate the scenario at ``path`` and write its outputs under ``out_dir``."""
    scenario = load_scenario(path)
    directory = Path(out_dir)
    if not force:
        check_free(directory, scenario.member_ids)
    result = simulate(scenario, seed=seed, on_progress=on_progress)
    files = render_files(result)
    written = write_outputs(directory, files, force=force)
    return SimulationRun(result, files, written)
