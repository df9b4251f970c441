"""The gate as a job on a runner slot runs it: through the slot's Docker API proxy, with the
`gpus` the job-started hook handed over (the slot's UUID), on a Docker Engine where a GPU device
request starts (the private daemon with the no-op NVIDIA hook). Both deterministic runs must get
that GPU, and only it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.docker_fixtures import PinnedImage
from helpers.gate_cli import check
from helpers.gpu_dockerd import GpuDockerd
from helpers.proxy_thread import RunningProxy

import repro_gate
from repro_gate.runner.proxy.policy import SlotPolicy

pytestmark = pytest.mark.docker
SLOT_GPU = "GPU-5e1c2a4b-8d3f-4b7e-9a61-0c2d3e4f5a6b"
OTHER_GPU = "GPU-7a9b0c1d-2e3f-4a5b-8c6d-7e8f9a0b1c2d"
# A "training" with one artifact in its run directory (the workspace is read-only): no torch.
TRAINING = "import os; open(os.environ['REPRO_GATE_RUN_DIR'] + '/out.txt', 'w').write('42')"


@pytest.fixture
def slot_proxy(gpu_dockerd: GpuDockerd, python_image: PinnedImage, tmp_path: Path,
               monkeypatch: pytest.MonkeyPatch) -> RunningProxy:
    """The slot's proxy in front of the private daemon; the gate installed in the work folder
    (as in a runner, so the probe it mounts is inside it) and pointed at the proxy."""
    gpu_dockerd.pull(python_image.reference)
    installed = tmp_path / "gate-install"
    shutil.copytree(Path(repro_gate.__file__).parent, installed / "repro_gate",
                    ignore=shutil.ignore_patterns("__pycache__"))
    running = RunningProxy(SlotPolicy(gpu_uuid=SLOT_GPU, work_folder=tmp_path),
                           gpu_dockerd.socket)
    monkeypatch.setenv("PYTHONPATH", str(installed))
    monkeypatch.setenv("DOCKER_HOST", f"unix://{running.socket}")
    yield running
    running.stop()


def gate(workspace: Path, image: str, gpus: str) -> tuple[int, dict, str]:
    result = check(workspace, "--name", "slot-gate", "--image", image, "--gpus", gpus,
                   "--no-cost", "--no-noise-floor", "--timeout", "120",
                   "--", "python", "-c", TRAINING)
    return result.exit_code, result.manifest, result.stdout + result.stderr


def test_both_runs_of_the_gate_get_the_slots_gpu_and_no_other(
    slot_proxy: RunningProxy, gpu_dockerd: GpuDockerd, python_image: PinnedImage,
    workspace: Path,
) -> None:
    before = set(gpu_dockerd.visible_devices())

    code, manifest, output = gate(workspace, python_image.reference, SLOT_GPU)

    assert code == 0, output
    assert manifest["verdict"] == "pass"
    assert [(run["name"], run["launcher"]) for run in manifest["runs"]] == [
        ("A", "docker"), ("B", "docker")]
    started = {c: d for c, d in gpu_dockerd.visible_devices().items() if c not in before}
    assert sorted(started.values()) == [SLOT_GPU, SLOT_GPU]  # runs A and B, that GPU each

    code, manifest, output = gate(workspace, python_image.reference, OTHER_GPU)

    assert code == 2, output
    message = manifest["reasons"][0]["message"]
    assert message.startswith("cannot create the container for run A: repro-gate docker proxy:")
    assert f"DeviceIDs ['{OTHER_GPU}'] is refused" in message
    assert set(gpu_dockerd.visible_devices()) == set(before) | set(started)  # nothing started
