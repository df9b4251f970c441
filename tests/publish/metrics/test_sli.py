"""Metric families from manifests, push targets, and the metrics section's schema."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from helpers.metrics_servers import make_fingerprint, make_manifest
from prometheus_client.parser import text_string_to_metric_families

from repro_gate import validation
from repro_gate.config import MetricsConfig
from repro_gate.publish.metrics import push_manifest
from repro_gate.publish.metrics.pushgateway import keep_payload, resolve_target
from repro_gate.publish.metrics.sli import environment_labels

# Labels whose values grow without bound; none may appear on a metric or in a grouping key.
UNBOUNDED = {"pr", "pull_request", "sha", "commit", "run_id", "run", "hostname", "instance"}


def parsed(path: Path) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Series of an exposition file: sample name -> sorted labels -> value."""
    series: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(path.read_text(encoding="utf-8")):
        for sample in family.samples:
            series.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return series


def test_payload_of_a_failed_run(tmp_path: Path) -> None:
    manifest = make_manifest("fail", max_abs_diff=0.5, ops=3, cost_pct=40.0)
    series = parsed(keep_payload(manifest, tmp_path))

    assert series["repro_gate_runs_total"] == {
        (("verdict", "pass"),): 0.0,
        (("verdict", "fail"),): 1.0,
        (("verdict", "error"),): 0.0,
    }
    assert series["repro_gate_checkpoint_comparisons_total"] == {(): 1.0}
    assert series["repro_gate_checkpoint_matches_total"] == {(): 0.0}
    assert series["repro_gate_max_abs_divergence"] == {(): 0.5}
    assert series["repro_gate_first_divergence_step"] == {(): 3.0}
    assert series["repro_gate_determinism_cost_ratio"] == {(): 0.4}
    assert series["repro_gate_nondeterministic_ops"] == {(): 1.0}
    assert series["repro_gate_nondeterministic_op_calls"] == {(): 3.0}
    assert series["repro_gate_run_duration_seconds"] == {
        (("mode", "deterministic"),): 11.0,
        (("mode", "default"),): 8.0,
    }
    finished = datetime.fromisoformat(manifest["finished_at"].replace("Z", "+00:00"))
    assert series["repro_gate_last_run_timestamp_seconds"] == {(): finished.timestamp()}
    assert series["repro_gate_last_success_timestamp_seconds"] == {(): 0.0}
    assert series["repro_gate_last_run_verdict"][(("verdict", "fail"),)] == 1.0


def test_names_follow_prometheus_conventions(tmp_path: Path) -> None:
    series = parsed(keep_payload(make_manifest("pass", cost_pct=5.0), tmp_path))
    assert all(name.startswith("repro_gate_") for name in series)
    assert not any(name.endswith("_created") for name in series)
    text = (tmp_path / "metrics.prom").read_text(encoding="utf-8")
    counters = [line.split()[2] for line in text.splitlines() if line.endswith(" counter")]
    assert counters and all(name.endswith("_total") for name in counters)
    labels = {key for values in series.values() for key_set in values for key, _ in key_set}
    assert not labels & UNBOUNDED
    assert 0 <= series["repro_gate_determinism_cost_ratio"][()] <= 1


def test_pass_sets_last_success_and_matches(tmp_path: Path) -> None:
    series = parsed(keep_payload(make_manifest("pass"), tmp_path))
    assert series["repro_gate_checkpoint_matches_total"] == {(): 1.0}
    assert (
        series["repro_gate_last_success_timestamp_seconds"]
        == series["repro_gate_last_run_timestamp_seconds"]
    )
    assert "repro_gate_first_divergence_step" not in series


def test_environment_info_from_the_fingerprint(tmp_path: Path) -> None:
    fingerprint = make_fingerprint(gpus=("NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"))
    series = parsed(keep_payload(make_manifest("pass", fingerprint=fingerprint), tmp_path))
    labels = {"torch": "2.4.1+cu124", "cuda": "12.4", "driver": "550.54.15"}
    expected = tuple(sorted({**labels, "gpu_model": "NVIDIA H100 80GB HBM3"}.items()))
    assert series["repro_gate_environment_info"] == {expected: 1.0}


def test_environment_labels_are_unknown_when_absent_and_bounded() -> None:
    unknown = {"torch": "unknown", "cuda": "unknown", "driver": "unknown", "gpu_model": "unknown"}
    assert environment_labels(None) == unknown
    cpu_only = make_fingerprint(torch=None, cuda_build=None, driver=None, gpus=())
    assert environment_labels(cpu_only) == unknown
    assert environment_labels(make_fingerprint(gpus=(None,)))["gpu_model"] == "unknown"
    assert environment_labels(make_fingerprint(gpus=(None, "NVIDIA A10G")))["gpu_model"] == (
        "NVIDIA A10G"
    )
    long_name = environment_labels(make_fingerprint(gpus=("x" * 500,)))["gpu_model"]
    assert long_name == "x" * 64


def test_environment_info_without_a_fingerprint(tmp_path: Path) -> None:
    series = parsed(keep_payload(make_manifest("pass"), tmp_path))
    unknown = (("cuda", "unknown"), ("driver", "unknown"), ("gpu_model", "unknown"))
    assert series["repro_gate_environment_info"] == {(*unknown, ("torch", "unknown")): 1.0}


def test_url_precedence_input_then_environment_then_config() -> None:
    manifest = make_manifest("pass", gate="lm")
    settings = MetricsConfig(pushgateway_url="http://config:9091", job="ml-ci", runner_slot="gpu-2")
    both = {"INPUT_PUSHGATEWAY-URL": "http://input:9091", "REPRO_GATE_PUSHGATEWAY_URL": "env:9091"}
    target = resolve_target(manifest, settings, both)
    assert target is not None and target.url == "http://input:9091"
    target = resolve_target(manifest, settings, {"REPRO_GATE_PUSHGATEWAY_URL": "env:9091"})
    assert target is not None and target.url == "http://env:9091"
    target = resolve_target(manifest, settings, {"GITHUB_REPOSITORY": "octo/lm"})
    assert target is not None and target.url == "http://config:9091"
    assert target.job == "ml-ci"
    assert target.grouping_key == {"repository": "octo/lm", "gate": "lm", "runner_slot": "gpu-2"}


def test_credentials_never_show_in_the_section_url() -> None:
    environ = {"REPRO_GATE_PUSHGATEWAY_URL": "https://u:p@gw.example:9091/pg"}
    target = resolve_target(make_manifest("pass"), MetricsConfig(), environ)
    assert target is not None
    assert target.display_url == "https://gw.example:9091/pg"


def test_no_gateway_configured(tmp_path: Path) -> None:
    section = push_manifest(make_manifest("pass"), MetricsConfig(), tmp_path, environ={})
    assert section == {"pushed": False, "reason": "no pushgateway configured"}
    assert list(tmp_path.iterdir()) == []


def test_a_bad_url_is_a_section_not_an_exception(tmp_path: Path) -> None:
    section = push_manifest(
        make_manifest("pass"), MetricsConfig(pushgateway_url="ftp://gw:21"), tmp_path, environ={}
    )
    assert section["pushed"] is False
    assert "not http or https" in section["reason"]


def test_metrics_section_schema() -> None:
    pushed = {
        "pushed": True,
        "url": "http://gw:9091",
        "job": "repro-gate",
        "grouping_key": {"repository": "o/r", "gate": "train", "runner_slot": "s1"},
        "attempts": 1,
        "counted": True,
        "note": "counted",
        "pushed_at": datetime(2026, 1, 2, tzinfo=timezone.utc).isoformat(),
        "payload": "out/metrics.prom",
    }
    assert validation.errors("metrics", pushed) == []
    not_configured = {"pushed": False, "reason": "no pushgateway configured"}
    assert validation.errors("metrics", not_configured) == []
    assert validation.errors("metrics", {"pushed": False}) == ["reason: is required"]
    incomplete = {"pushed": True, "url": "http://gw:9091"}
    assert "grouping_key: is required" in validation.errors("metrics", incomplete)
    extra = dict(pushed, grouping_key={**pushed["grouping_key"], "pr": "12"})
    assert validation.errors("metrics", extra) == ["grouping_key: unknown key 'pr'"]
