"""Every attempt of `runner audit`, in the order they run and are reported: grouped by class in
the threat model's order, each named once, each run by a function of the module of its kind,
and those that need another slot all about other slots."""

from __future__ import annotations

import itertools

from repro_gate.runner.audit import devices, framing, mounts, other_slots
from repro_gate.runner.audit.table import ATTEMPTS

CLASSES = ["framing", "volumes", "check-then-mount", "other slots", "leaks", "host", "gpu"]


def test_attempts_come_grouped_by_class_in_the_threat_models_order() -> None:
    groups = [klass for klass, _ in itertools.groupby(attempt.klass for attempt in ATTEMPTS)]

    assert groups == CLASSES


def test_each_attempt_is_named_once() -> None:
    names = [(attempt.klass, attempt.name) for attempt in ATTEMPTS]

    assert len(set(names)) == len(names) == 35


def test_each_attempt_is_run_by_a_public_function_of_its_kinds_module() -> None:
    modules = {"framing": {framing}, "volumes": {mounts}, "check-then-mount": {mounts},
               "other slots": {other_slots}, "leaks": {other_slots},
               "host": {mounts, devices}, "gpu": {devices}}

    for attempt in ATTEMPTS:
        module = next(m for m in modules[attempt.klass] if m.__name__ == attempt.run.__module__)
        assert getattr(module, attempt.run.__name__) is attempt.run
        assert not attempt.run.__name__.startswith("_")
    assert len({attempt.run for attempt in ATTEMPTS}) == len(ATTEMPTS)


def test_only_attempts_on_other_slots_and_their_leaks_need_another_slot() -> None:
    needing = [attempt for attempt in ATTEMPTS if attempt.needs_other_slot]

    assert {attempt.klass for attempt in needing} == {"other slots", "leaks"}
    assert all(attempt.run.__module__ == other_slots.__name__ for attempt in needing)
    # These reach the host or its loopback, not the other slot: they run with one slot too.
    assert {attempt.run for attempt in ATTEMPTS
            if attempt.klass in ("other slots", "leaks") and not attempt.needs_other_slot} == {
        other_slots.build_cgroup_parent, other_slots.import_from_url,
        other_slots.build_from_remote, other_slots.security_opt_disable}
