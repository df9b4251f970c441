"""Run G (golden/rebuild.py): the training once in the golden file's rebuilt software, in its
own working copy and with the probe as in run A; never compared with runs A and B, only with the
golden trajectory. It is recorded in `runs[]` with the purpose `golden_attribution`."""

from __future__ import annotations

from collections.abc import Callable

from repro_gate.config import Config
from repro_gate.environments import Environment
from repro_gate.environments.launcher import InEnvironment, python_environment
from repro_gate.gate import training_run
from repro_gate.gate.training_run import RunRecord
from repro_gate.golden.document import RunData
from repro_gate.golden.rebuild import PURPOSE, RUN_NAME, RunIn
from repro_gate.launch import cancel
from repro_gate.launch.base import Launcher, LineSink


def runner(config: Config, launcher: Launcher, records: list[RunRecord],
           sink_for: Callable[[str], LineSink]) -> RunIn:
    """Runs G in an environment; its record joins `records`."""

    def run(environment: Environment) -> RunData:
        inside = InEnvironment(launcher, python_environment(environment))
        spec = training_run.build_spec(config, inside, RUN_NAME, "deterministic")
        try:
            cancel.listen_again()  # the gate stopped listening once its verdict was decided
            record = training_run.execute(inside, spec, sink_for(RUN_NAME),
                                          list(config.artifacts))
        finally:
            cancel.ignore_from_now()
        record.purpose = PURPOSE
        records.append(record)
        failure = training_run.run_failure(record, config.timeout)
        if failure is not None:
            raise failure
        return RunData(record.trajectory, {}, [(a.rel_path, a.path) for a in record.artifacts],
                       config.name)

    return run
