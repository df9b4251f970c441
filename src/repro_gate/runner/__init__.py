"""The self-hosted GPU runner service (`repro-gate runner`); docs/runner.md.

    service.py          `runner serve`: start-up, a thread per slot, the drain
    slot_cycle.py       one slot's job cycle: health, registration, runner, cleanup
    slot_endpoint.py    what a job on a slot gets: its engine behind its filter
    slot_reset.py       the reset between jobs: the engine killed, emptied, started, checked
    engine_data.py      what the reset removes from a stopped engine's data root
    slot_control.py     the control socket `runner reset-slot` asks the slot's holder through
    slot_engine.py      the slot's rootless Docker engine, under the slot's user
    slot_identity.py    the slot's user and subordinate IDs
    slot_folders.py     the slot's folders, owners and modes
    host_setup.py       `runner setup`: users, IDs, folders, device nodes
    audit_session.py    `runner audit`: the slots brought up, then `audit/`'s attempts
    proxy/              the per-slot Docker API filter (docs/runner-proxy.md)
    audit/              the escape attempts (docs/runner-threat-model.md)
    slots.py, health.py, registration.py, github_auth.py, containers.py, runner_watch.py,
    hook.py, metrics.py, runner_config.py: slots, GPU health, GitHub, Docker, the hook,
    metrics and runner.yml
"""
