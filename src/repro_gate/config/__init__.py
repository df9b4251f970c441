"""The gate's configuration: loaded from `.repro-gate.yml`, flags and action inputs, typed."""

from repro_gate.config.loader import load, recorded_section
from repro_gate.config.model import (
    DEFAULT_NAME,
    DEFAULT_OUTPUT_DIR,
    CompareConfig,
    Config,
    ContainerConfig,
    CostConfig,
    GoldenConfig,
    IgnoreRule,
    MetricsConfig,
    ReferenceConfig,
    ReportConfig,
    ResumeConfig,
    ToleranceConfig,
)
from repro_gate.config.vary import VaryConfig

__all__ = [
    "DEFAULT_NAME",
    "DEFAULT_OUTPUT_DIR",
    "CompareConfig",
    "Config",
    "ContainerConfig",
    "CostConfig",
    "GoldenConfig",
    "IgnoreRule",
    "MetricsConfig",
    "ReferenceConfig",
    "ReportConfig",
    "ResumeConfig",
    "ToleranceConfig",
    "VaryConfig",
    "load",
    "recorded_section",
]
