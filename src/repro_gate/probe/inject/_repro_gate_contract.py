"""The contract with the gate: environment variables the probe reads, files it writes.

The values are the same literals as in `repro_gate.probe` (the probe never imports repro_gate);
tests/probe/test_probe_contract.py checks that the two copies agree.
"""

ENV_RUN_DIR = "REPRO_GATE_RUN_DIR"
ENV_MODE = "REPRO_GATE_MODE"
ENV_SEED = "REPRO_GATE_SEED"
ENV_DETERMINISM = "REPRO_GATE_DETERMINISM"
ENV_MAX_STEPS = "REPRO_GATE_MAX_STEPS"
ENV_LOCALISE_STEP = "REPRO_GATE_LOCALISE_STEP"
ENV_COST_PLAN = "REPRO_GATE_COST_PLAN"
ENV_USER_ENV = "REPRO_GATE_USER_ENV"
ENV_RESUME_AFTER = "REPRO_GATE_RESUME_AFTER"
ENV_RESUME_RECORDS = "REPRO_GATE_RESUME_RECORDS"
ENV_RESUME_CHECKPOINT = "REPRO_GATE_RESUME_CHECKPOINT"
ENV_RESUME_STEP = "REPRO_GATE_RESUME_STEP"
PROBE_SUBDIR = ".repro-gate"
TRAJECTORY_FILE = "trajectory.jsonl"
ALERTS_FILE = "alerts.json"
STATUS_FILE = "status.json"
FINGERPRINT_FILE = "fingerprint.json"
LOCALISE_FILE = "localise.json"
COST_FILE = "cost_arms.json"
RESUME_POINT_FILE = "resume_point.json"
RESUME_STATE_FILE = "resume_state.jsonl"
STOP_FILE = "stop"
GATE_STOP_REASON = "stop_file"
STOP_EXIT_CODE = 86

# Probe-internal: the pid of the process that records; its children see it and stay silent.
ENV_OWNER_PID = "REPRO_GATE_PROBE_OWNER_PID"

# A rank > 0 writes its own files: `trajectory-rank1.jsonl`, `status-rank1.json`, ...
RANK_FILE = "{stem}-rank{rank}{suffix}"


def rank_file(name: str, rank: int) -> str:
    """The name of file `name` for `rank`: rank 0 keeps the plain name (single-process runs)."""
    if rank == 0:
        return name
    stem, dot, suffix = name.partition(".")
    return RANK_FILE.format(stem=stem, rank=rank, suffix=dot + suffix)
