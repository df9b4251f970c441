"""The training image's record in the manifest and its variables (no daemon)."""

from __future__ import annotations

from docker.models.images import Image

from repro_gate.launch.docker_image import environment, record

IMAGE = Image(attrs={"Id": "sha256:" + "a" * 64,
                     "RepoDigests": ["registry.example/t@sha256:" + "b" * 64],
                     "Config": {"Env": ["PATH=/opt/conda/bin:/usr/bin", "PYTHONPATH=/app",
                                        "BROKEN"]}})


def test_the_image_record_keeps_the_reference_id_and_digests() -> None:
    assert record("registry.example/t:1", IMAGE) == {
        "reference": "registry.example/t:1", "id": "sha256:" + "a" * 64,
        "repo_digests": ["registry.example/t@sha256:" + "b" * 64]}
    assert record("local:1", Image(attrs={"Id": "sha256:c"}))["repo_digests"] == []


def test_the_images_variables_are_its_env_lines_with_a_value() -> None:
    assert environment(IMAGE) == {"PATH": "/opt/conda/bin:/usr/bin", "PYTHONPATH": "/app"}
    assert environment(Image(attrs={"Id": "sha256:c"})) == {}
