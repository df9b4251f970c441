"""Fixtures of the metrics tests: real Pushgateway and Prometheus servers."""

from helpers.metrics_servers import prometheus, pushgateway

__all__ = ["prometheus", "pushgateway"]
