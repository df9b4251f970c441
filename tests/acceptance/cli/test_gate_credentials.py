"""The gate's own credentials never reach the training, its logs or the manifest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.gate_cli import script
from helpers.git_repo import git
from helpers.paths import MANIFEST_FAIL

from repro_gate import credentials
from repro_gate.fingerprint.code import collect_code
from repro_gate.manifest import store

GITHUB_TOKEN = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
RUNTIME_TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.runtime"
OIDC_TOKEN = "oidc-request-token-5f1a9c"


def gate_environment(**extra: str) -> dict[str, str]:
    """The caller's environment without Actions variables, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_"))}
    return {**base, **extra}


def run_check(workdir: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "repro_gate", "check", "--quiet", *args],
        cwd=workdir, env=env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_training_sees_user_variables_but_no_gate_credential(project: Path) -> None:
    env = gate_environment(
        GITHUB_TOKEN=GITHUB_TOKEN,
        ACTIONS_RUNTIME_TOKEN=RUNTIME_TOKEN,
        ACTIONS_ID_TOKEN_REQUEST_TOKEN=OIDC_TOKEN,
        COPY_OF_THE_TOKEN=GITHUB_TOKEN,  # same secret, another name
        MY_DATA_TOKEN="keep",
    )
    completed = run_check(project, env, *script("print_environment.py"))
    assert completed.returncode == 0, completed.stdout + completed.stderr

    output = project / "repro-gate-out"
    logs = sorted(output.rglob("*.log"))
    assert logs, "the runs wrote no logs"
    written = [path.read_text(errors="replace") for path in logs]
    written.append((output / "manifest.json").read_text())
    for text in written:
        for secret in (GITHUB_TOKEN, RUNTIME_TOKEN, OIDC_TOKEN):
            assert secret not in text
        assert "COPY_OF_THE_TOKEN=" not in text
    for log in written[:-1]:
        assert "MY_DATA_TOKEN=keep\n" in log
        assert f"PATH={os.environ['PATH']}\n" in log


def test_gate_credential_in_env_allow_is_a_configuration_error(tmp_path: Path) -> None:
    (tmp_path / ".repro-gate.yml").write_text("container:\n  env_allow: [GITHUB_TOKEN]\n")
    completed = run_check(tmp_path, gate_environment())
    assert completed.returncode == 2
    assert "Traceback" not in completed.stderr
    (line,) = completed.stderr.strip().splitlines()
    assert "container.env_allow: GITHUB_TOKEN is a credential of the gate" in line


def test_manifest_writes_mask_credential_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", GITHUB_TOKEN)
    document = json.loads(MANIFEST_FAIL.read_text())
    document["reasons"][0]["message"] = f"the run printed {GITHUB_TOKEN} and stopped"
    path = store.write(document, tmp_path)
    text = path.read_text()
    assert GITHUB_TOKEN not in text
    assert "the run printed *** and stopped" in text
    store.update(path, {**document, "gate": document["gate"]})
    assert GITHUB_TOKEN not in path.read_text()


def test_environment_helpers() -> None:
    environ = {
        "GITHUB_TOKEN": GITHUB_TOKEN,
        "INPUT_GITHUB-TOKEN": GITHUB_TOKEN,
        "ACTIONS_ID_TOKEN_REQUEST_URL": "https://token.actions.example/idtoken?x=1",
        "REPRO_GATE_PUSHGATEWAY_USERNAME": "gate",
        "REPRO_GATE_PUSHGATEWAY_PASSWORD": "pushgateway-s3cret",
        "REPRO_GATE_RUNNER_TOKEN": "runner-token-abc",
        "ALIAS": "pushgateway-s3cret",
        "PATH": "/usr/bin",
        "CUDA_VISIBLE_DEVICES": "0",
        "HF_TOKEN": "hf_user_owned",
    }
    assert credentials.without_credentials(environ) == {
        "PATH": "/usr/bin", "CUDA_VISIBLE_DEVICES": "0", "HF_TOKEN": "hf_user_owned",
    }
    values = credentials.credential_values(environ)
    assert "gate" not in values  # a user name is removed from runs, never masked
    assert credentials.mask(f"a {GITHUB_TOKEN} b runner-token-abc", values) == "a *** b ***"


def test_fingerprint_remote_url_loses_its_credentials(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q")
    git(tmp_path, "remote", "add", "origin",
        "https://user:ghp_x@github.com/o/r.git?token=abc&ref=main")
    (tmp_path / "train.py").write_text("print(1)\n")
    git(tmp_path, "add", "train.py")
    git(tmp_path, "commit", "-qm", "init")

    remote = collect_code(tmp_path)["remote_url"]
    assert remote == "https://github.com/o/r.git?ref=main"
    assert credentials.strip_url_credentials(
        "https://b.s3.amazonaws.com/k?X-Amz-Signature=f00&X-Amz-Credential=AKIA&v=2"
    ) == "https://b.s3.amazonaws.com/k?v=2"


def test_index_url_credentials_are_masked_where_they_are_shown() -> None:
    shown = credentials.mask_url_credentials(
        "Failed to fetch https://user:tok3n@host/simple/x/ and http://tok3n@10.0.0.1:8080/s;"
        " --index-url=http://u:p4ss@127.0.0.1/simple/ git+ssh://git@github.com/o/r")
    assert shown == ("Failed to fetch https://user:***@host/simple/x/ and http://***@10.0.0.1:8080/s;"
                     " --index-url=http://u:***@127.0.0.1/simple/ git+ssh://git@github.com/o/r")


def test_stream_masker_finds_a_value_cut_across_chunks() -> None:
    masker = credentials.StreamMasker([GITHUB_TOKEN, "runner-token-abc"])
    stream = f"token {GITHUB_TOKEN} and runner-token-abc end\n".encode()
    for size in (1, 3, 7, len(stream)):
        pieces = [stream[i:i + size] for i in range(0, len(stream), size)]
        written = b"".join(masker.feed(piece) for piece in pieces) + masker.flush()
        assert written == b"token *** and *** end\n"
    assert credentials.StreamMasker([]).feed(b"as is") == b"as is"
