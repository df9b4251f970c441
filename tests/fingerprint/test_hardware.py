"""The host's CPU as /proc/cpuinfo describes it, on x86 and ARM."""

from __future__ import annotations

import os
import platform
from pathlib import Path

from repro_gate.fingerprint.hardware import collect_cpu, cpu_model

X86 = """processor\t: 0
vendor_id\t: AuthenticAMD
model\t\t: 1
model name\t: AMD EPYC 7B13 64-Core Processor
flags\t\t: fpu vme

processor\t: 1
model name\t: Another CPU
"""
ARM = """processor\t: 0
BogoMIPS\t: 50.00
CPU part\t: 0xd0c

Hardware\t: Ampere Altra
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "cpuinfo"
    path.write_text(text, encoding="utf-8")
    return path


def test_x86_and_arm_descriptions_name_the_model_of_the_first_cpu(tmp_path: Path) -> None:
    assert cpu_model(write(tmp_path, X86)) == "AMD EPYC 7B13 64-Core Processor"
    assert cpu_model(write(tmp_path, ARM)) == "Ampere Altra"


def test_no_model_is_named_without_a_file_or_a_model_field(tmp_path: Path) -> None:
    assert cpu_model(tmp_path / "missing") is None
    assert cpu_model(write(tmp_path, "processor\t: 0\nflags\t: fpu\n")) is None


def test_the_cpu_section_counts_cpus_and_names_the_machine(tmp_path: Path) -> None:
    cpu = collect_cpu(write(tmp_path, X86))

    assert cpu["model"] == "AMD EPYC 7B13 64-Core Processor"
    assert cpu["count"] == os.cpu_count()
    assert cpu["available"] == len(os.sched_getaffinity(0))
    assert cpu["machine"] == platform.machine()


def test_without_a_model_in_cpuinfo_the_platform_names_the_processor(tmp_path: Path) -> None:
    cpu = collect_cpu(tmp_path / "missing")

    assert cpu["model"] == (platform.processor() or None)
