"""SLI metrics of gate runs, pushed to a Prometheus Pushgateway (see docs/metrics.md)."""

from repro_gate.publish.metrics.pushgateway import push_manifest

__all__ = ["push_manifest"]
