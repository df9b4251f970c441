"""JIT registration, listing, deleting and App tokens against the fake GitHub, whose every
request is validated against GitHub's official REST description."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import stat
import sys
import time
from pathlib import Path

import pytest
from helpers.fake_github import Answer, FakeGitHub, Principal
from helpers.runner_files import SLOT_UUIDS, app_keys, repro_gate, token_file, write_config

from repro_gate.errors import GitHubAnswerError, GitHubError
from repro_gate.publish.github.client import RetryPolicy
from repro_gate.runner.github_auth import AppInstallationToken, rs256_signer
from repro_gate.runner.registration import MAX_NAME, Registrar, runner_name_stem
from repro_gate.runner.runner_config import load_runner_config
from repro_gate.runner.slots import Slot

FAST = RetryPolicy(budget=20, base_delay=0.05, max_delay=0.2)
H100 = Slot(1, SLOT_UUIDS[1], "NVIDIA H100 80GB HBM3")


def token_config(folder: Path, fake: FakeGitHub, **github_keys: object) -> Path:
    target = github_keys or {"repository": "octo-org/trainer"}
    return write_config(folder, {**target, "api_url": fake.base_url,
                                 "auth": {"token_file": token_file(folder).name}})


def test_register_once_for_a_repository(tmp_path: Path, github: FakeGitHub) -> None:
    path = token_config(tmp_path, github)
    result = repro_gate("runner", "register-once", "--config", str(path), "--slot", "1",
                        "--jit-config-file", "jit", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [runner] = github.actions.runners.values()
    assert result.stdout == f"repro-gate-gpuhost-slot1 (id {runner['id']})\n"
    [sent] = github.requests_to("POST", "/actions/runners/generate-jitconfig$")
    assert sent.path == "/repos/octo-org/trainer/actions/runners/generate-jitconfig"
    assert sent.body == {"name": "repro-gate-gpuhost-slot1", "runner_group_id": 1,
                         "labels": ["self-hosted", "gpu", "nvidia-h100-80gb-hbm3", "repro-gate"]}
    jit = tmp_path / "jit"
    assert stat.S_IMODE(jit.stat().st_mode) == 0o600
    assert json.loads(base64.b64decode(jit.read_text()))["runner_id"] == runner["id"]


def test_register_for_an_organisation_with_group_and_labels(
    tmp_path: Path, github: FakeGitHub
) -> None:
    path = token_config(tmp_path, github, organization="octo-org", runner_group_id=7,
                        labels=["pool-a", "gpu"])
    runner = Registrar(load_runner_config(path), policy=FAST).register(H100)
    [sent] = github.requests_to("POST", "generate-jitconfig")
    assert sent.path == "/orgs/octo-org/actions/runners/generate-jitconfig"
    assert sent.body["runner_group_id"] == 7
    assert runner.labels == ("self-hosted", "gpu", "nvidia-h100-80gb-hbm3", "repro-gate", "pool-a")
    assert github.actions.runners[runner.id]["runner_group_id"] == 7


def test_a_refused_registration_is_one_line(tmp_path: Path, github: FakeGitHub) -> None:
    path = token_config(tmp_path, github)
    token_file(tmp_path, "ghs_revoked")
    result = repro_gate("runner", "register-once", "--config", str(path), "--slot", "0",
                        cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == ("repro-gate: error: registration failed: POST /repos/octo-org/"
                             "trainer/actions/runners/generate-jitconfig: HTTP 401: Bad"
                             " credentials\n")


def test_the_longest_prefix_and_host_keep_each_slot_its_own_name(
    tmp_path: Path, github: FakeGitHub
) -> None:
    path = write_config(tmp_path, {"repository": "octo-org/trainer", "api_url": github.base_url,
                                   "auth": {"token_file": token_file(tmp_path).name}},
                        name_prefix="p" * 30, host="h" * 30)
    config = load_runner_config(path)
    registrar = Registrar(config, policy=FAST)
    names = [registrar.register(Slot(index, uuid, "NVIDIA H100 80GB HBM3")).name
             for index, uuid in enumerate(SLOT_UUIDS)]
    stem = runner_name_stem(config.name_prefix, config.host)
    assert names == [stem + "0", stem + "1"]
    assert all(len(name) <= MAX_NAME for name in names)
    assert [r.name for r in registrar.list_runners()] == names


def test_list_by_prefix_across_pages_and_delete(tmp_path: Path, github: FakeGitHub) -> None:
    scope = "repos/octo-org/trainer"
    ours = [github.actions.add_runner(scope, f"repro-gate-gpuhost-slot{i}") for i in range(130)]
    github.actions.add_runner(scope, "build-box-1", status="online")
    github.actions.add_runner("repos/octo-org/other", "repro-gate-gpuhost-slot0")
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    listed = registrar.list_runners()
    assert [r.id for r in listed] == [r["id"] for r in ours]
    assert len(github.requests_to("GET", "/actions/runners$")) == 2  # 100 + 31 on two pages
    assert registrar.delete(listed[0].id) is True
    assert registrar.delete(listed[0].id) is False  # already gone: not an error
    assert listed[0].id not in github.actions.runners


def test_502_then_success_and_429_with_retry_after(tmp_path: Path, github: FakeGitHub) -> None:
    github.script("POST", "generate-jitconfig$", Answer(502, body={"message": "Bad Gateway"}),
                  Answer(429, headers={"Retry-After": "1"}, body={"message": "rate limit"}))
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    runner = registrar.register(H100)
    sent = github.requests_to("POST", "generate-jitconfig$")
    assert len(sent) == 3 and list(github.actions.runners) == [runner.id]
    assert sent[2].at - sent[1].at >= 1.0  # Retry-After honoured


def test_a_name_already_registered_is_a_conflict(tmp_path: Path, github: FakeGitHub) -> None:
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    registrar.register(H100)
    with pytest.raises(GitHubError, match="HTTP 409: Already exists"):
        registrar.register(H100)


def app_config(folder: Path, fake: FakeGitHub) -> Path:
    private, public = app_keys(folder)
    fake.actions.public_key = public
    app = {"app_id": fake.actions.app_id, "installation_id": fake.actions.installation_id,
           "private_key_file": private.name}
    return write_config(folder, {"organization": "octo-org", "api_url": fake.base_url,
                                 "auth": {"app": app}})


def test_installation_token_fetched_reused_and_refreshed(
    tmp_path: Path, github: FakeGitHub
) -> None:
    effective = load_runner_config(app_config(tmp_path, github))
    margin = effective.github.auth.refresh_margin
    github.actions.token_ttl = margin + 2  # expiry seconds away: inside the margin soon
    tokens = AppInstallationToken(effective.github.auth, github.base_url, policy=FAST)
    registrar = Registrar(effective, tokens=tokens, policy=FAST)
    registrar.register(H100)
    registrar.list_runners()
    assert github.actions.issued == ["ghs_installation1"]  # one token for both calls
    time.sleep(2.5)  # now less than the margin is left: fetched again before use
    registrar.list_runners()
    assert github.actions.issued == ["ghs_installation1", "ghs_installation2"]
    used = [s.headers["Authorization"] for s in github.seen if "/actions/" in s.path]
    assert used == ["Bearer ghs_installation1"] * 2 + ["Bearer ghs_installation2"]
    [sent] = github.requests_to("POST", "/app/installations/77/access_tokens")[:1]
    assert sent.body is None


@pytest.mark.parametrize("backend", ["cryptography", "openssl"])
def test_both_signers_make_a_jwt_github_accepts(
    tmp_path: Path, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    calls = tmp_path / "openssl-calls"
    if backend == "openssl":  # as in an image without cryptography; the command is logged
        for name in [n for n in sys.modules if n.split(".")[0] == "cryptography"]:
            monkeypatch.setitem(sys.modules, name, None)
        monkeypatch.setitem(sys.modules, "cryptography", None)
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "openssl").write_text(
            f'#!/bin/sh\necho "$1" >> {calls}\nexec {shutil.which("openssl")} "$@"\n')
        (tools / "openssl").chmod(0o755)
        monkeypatch.setenv("PATH", f"{tools}:{os.environ['PATH']}")
    else:
        pytest.importorskip("cryptography")
    effective = load_runner_config(app_config(tmp_path, github))
    tokens = AppInstallationToken(effective.github.auth, github.base_url, policy=FAST,
                                  sign=rs256_signer())
    assert tokens.token() == "ghs_installation1"  # the fake verified the RS256 signature
    assert calls.exists() == (backend == "openssl")


def test_a_jwt_signed_with_another_key_is_refused(tmp_path: Path, github: FakeGitHub) -> None:
    effective = load_runner_config(app_config(tmp_path, github))
    other = tmp_path / "other"
    other.mkdir()
    _, github.actions.public_key = app_keys(other)
    with pytest.raises(GitHubError, match="HTTP 401: A JSON web token could not be decoded"):
        AppInstallationToken(effective.github.auth, github.base_url, policy=FAST).token()


def test_register_once_with_a_github_app(tmp_path: Path, github: FakeGitHub) -> None:
    path = app_config(tmp_path, github)
    result = repro_gate("runner", "register-once", "--config", str(path), "--slot", "0",
                        cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("repro-gate-gpuhost-slot0 (id ")
    [sent] = github.requests_to("POST", "generate-jitconfig")
    assert sent.path == "/orgs/octo-org/actions/runners/generate-jitconfig"
    assert sent.headers["Authorization"] == "Bearer ghs_installation1"


def test_check_config_signs_with_the_app_key(tmp_path: Path, github: FakeGitHub) -> None:
    path = app_config(tmp_path, github)
    ok = repro_gate("runner", "check-config", "--config", str(path), cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert ", auth: GitHub App 4242, installation 77" in ok.stdout
    (tmp_path / "app.pem").write_text("-----BEGIN RSA PRIVATE KEY-----\nnot a key\n")
    bad = repro_gate("runner", "check-config", "--config", str(path), cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith(f"repro-gate: error: github.auth.app.private_key_file"
                                 f" {tmp_path.resolve() / 'app.pem'}: cannot sign with it: ")
    assert bad.stderr.count("\n") == 1
    assert github.seen == []  # checking the configuration sends nothing


def test_a_token_without_the_permission_cannot_register(tmp_path: Path, github: FakeGitHub) -> None:
    github.tokens["ghs_readonly"] = Principal("ci[bot]", "ci", can_write=False)
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    token_file(tmp_path, "ghs_readonly")
    with pytest.raises(GitHubError, match="HTTP 403: Resource not accessible by integration"):
        registrar.register(H100)
    assert github.actions.runners == {}


GOOD_RUNNER = {"id": 23, "name": "repro-gate-gpuhost-slot1"}
LATER = "2099-01-01T00:00:00Z"
HUGE = b'{"runner": "' + b"x" * (5 * 1024 * 1024) + b'"}'


@pytest.mark.parametrize(("answer", "problem"), [
    (Answer(201, raw=b"<html>upstream error</html>"), "the answer is not JSON"),
    (Answer(201), "the answer is empty"),
    (Answer(201, raw=b"[" * 100_000), "the answer is not JSON"),  # nested past Python's stack
    (Answer(201, body=[GOOD_RUNNER]), "the answer is a list, not a JSON object"),
    (Answer(201, body="ok"), "the answer is a string, not a JSON object"),
    (Answer(201, body={"encoded_jit_config": "e30="}), "the answer holds no runner"),
    (Answer(201, body={"runner": {"name": "n"}, "encoded_jit_config": "e30="}),
     "the answer's runner holds no id"),
    (Answer(201, body={"runner": {**GOOD_RUNNER, "id": "23"}, "encoded_jit_config": "e30="}),
     "the answer's runner has id as a string, not a whole number"),
    (Answer(201, body={"runner": {**GOOD_RUNNER, "id": True}, "encoded_jit_config": "e30="}),
     "the answer's runner has id as true or false, not a whole number"),
    (Answer(201, body={"runner": GOOD_RUNNER, "encoded_jit_config": None}),
     "the answer has encoded_jit_config as null, not a string"),
    (Answer(201, raw=HUGE), "the answer is larger than 4 MiB: not read"),
    (Answer(201, raw=HUGE, length=False), "the answer is larger than 4 MiB: not read"),
], ids=["not-json", "empty", "too-deep", "list", "string", "no-runner", "no-id", "id-string",
        "id-bool", "null-config", "huge", "huge-unannounced"])
def test_a_malformed_registration_answer_is_one_typed_error_and_the_next_try_works(
    tmp_path: Path, github: FakeGitHub, answer: Answer, problem: str
) -> None:
    github.script("POST", "generate-jitconfig$", answer)
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    with pytest.raises(GitHubAnswerError) as raised:
        registrar.register(H100)
    assert str(raised.value) == ("POST /repos/octo-org/trainer/actions/runners/"
                                 f"generate-jitconfig: HTTP 201: {problem}")
    assert github.actions.runners == {}
    runner = registrar.register(H100)  # GitHub answers as described again: registered
    assert list(github.actions.runners) == [runner.id]


@pytest.mark.parametrize(("body", "problem"), [
    ([], "the answer is a list, not a JSON object"),
    ({"total_count": 1}, "the answer holds no runners"),
    ({"runners": [7]}, "runners[0] is a number, not a JSON object"),
    ({"runners": [{"id": 5, "status": "offline", "busy": False}]}, "runners[0] holds no name"),
    ({"runners": [{"id": 5, "name": "r", "status": "offline", "busy": "no"}]},
     "runners[0] has busy as a string, not true or false"),
])
def test_a_malformed_runner_list_is_one_typed_error(
    tmp_path: Path, github: FakeGitHub, body: object, problem: str
) -> None:
    github.script("GET", "/actions/runners$", Answer(200, body=body))
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=FAST)
    with pytest.raises(GitHubAnswerError, match=f"HTTP 200: {re.escape(problem)}$"):
        registrar.list_runners()
    registrar.register(H100)
    assert [r.name for r in registrar.list_runners()] == ["repro-gate-gpuhost-slot1"]


def test_a_slow_answer_is_cut_and_tried_again(tmp_path: Path, github: FakeGitHub) -> None:
    github.script("POST", "generate-jitconfig$", Answer(201, delay=3.0, body={}))
    policy = RetryPolicy(budget=20, request_timeout=0.5, base_delay=0.05, max_delay=0.2)
    registrar = Registrar(load_runner_config(token_config(tmp_path, github)), policy=policy)
    started = time.monotonic()
    runner = registrar.register(H100)
    assert time.monotonic() - started < 3.0
    assert len(github.requests_to("POST", "generate-jitconfig$")) == 2
    assert list(github.actions.runners) == [runner.id]


@pytest.mark.parametrize(("fields", "problem"), [
    ({"token": None, "expires_at": LATER}, "the answer has token as null, not a string"),
    ({"token": "ghs_a b", "expires_at": LATER}, "the answer's token is not one word"),
    ({"token": "ghs_x"}, "the answer holds no expires_at"),
    ({"token": "ghs_x", "expires_at": "in an hour"},
     "the answer has expires_at 'in an hour', not a time"),
])
def test_a_malformed_installation_token_is_one_typed_error(
    tmp_path: Path, github: FakeGitHub, fields: dict[str, object], problem: str
) -> None:
    effective = load_runner_config(app_config(tmp_path, github))
    github.script("POST", "/access_tokens$", Answer(201, body=fields))
    tokens = AppInstallationToken(effective.github.auth, github.base_url, policy=FAST)
    with pytest.raises(GitHubAnswerError, match=f"HTTP 201: {re.escape(problem)}$"):
        tokens.token()
    assert tokens.token() == "ghs_installation1"  # the next answer is good: it is used
