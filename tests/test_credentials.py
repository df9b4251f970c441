"""The gate's credentials: which variables hold them, and how they are kept out of the training's
environment, its logs, the manifest and recorded URLs."""

from __future__ import annotations

import copy

from repro_gate.credentials import (
    MASK,
    PUSHGATEWAY_PASSWORD,
    PUSHGATEWAY_USERNAME,
    StreamMasker,
    credential_values,
    is_gate_credential,
    mask,
    mask_document,
    mask_url_credentials,
    strip_url_credentials,
    without_credentials,
)


def test_the_gate_tokens_are_credentials_and_the_users_own_variables_are_not() -> None:
    assert is_gate_credential("GITHUB_TOKEN")
    assert is_gate_credential("INPUT_GITHUB-TOKEN")
    assert is_gate_credential("ACTIONS_ID_TOKEN_REQUEST_URL")
    assert is_gate_credential(PUSHGATEWAY_PASSWORD)
    assert not is_gate_credential("HF_TOKEN")
    assert not is_gate_credential("AWS_SECRET_ACCESS_KEY")


def test_a_copy_of_a_gate_secret_under_another_name_is_removed_too() -> None:
    environ = {
        "GITHUB_TOKEN": "ghs_abcdefgh",
        "MY_COPY": "ghs_abcdefgh",
        "HF_TOKEN": "hf_user_secret",
        "PATH": "/usr/bin",
    }

    kept = without_credentials(environ)

    assert kept == {"HF_TOKEN": "hf_user_secret", "PATH": "/usr/bin"}
    assert "GITHUB_TOKEN" in environ  # the input is left as it was


def test_values_too_short_to_mask_are_not_treated_as_secrets() -> None:
    environ = {"GITHUB_TOKEN": "1", "WORKERS": "1"}

    assert credential_values(environ) == []
    assert without_credentials(environ) == {"WORKERS": "1"}


def test_the_pushgateway_password_in_a_url_is_a_secret_and_the_user_name_is_not() -> None:
    environ = {
        "REPRO_GATE_PUSHGATEWAY_URL": "https://ci:s3cr3t-pass@push.example.com",
        PUSHGATEWAY_USERNAME: "gate",
        "GITHUB_TOKEN": "ghs_longer_token_value",
    }

    assert credential_values(environ) == ["ghs_longer_token_value", "s3cr3t-pass"]


def test_mask_replaces_every_occurrence() -> None:
    assert mask("token abcd and abcd again", ["abcd"]) == f"token {MASK} and {MASK} again"
    assert mask("nothing here", ["abcd"]) == "nothing here"


def test_a_secret_split_across_chunks_is_masked_and_plain_output_is_not_held_back() -> None:
    masker = StreamMasker(["supersecret"])

    first = masker.feed(b"step 1 loss 0.5\nkey=super")
    second = masker.feed(b"secret done\n")

    assert first == b"step 1 loss 0.5\nkey="
    assert first + second + masker.flush() == b"step 1 loss 0.5\nkey=***" + b" done\n"
    assert masker.feed(b"plain line\n") == b"plain line\n"


def test_a_held_back_prefix_that_never_becomes_a_secret_comes_out_on_flush() -> None:
    masker = StreamMasker(["supersecret"])

    assert masker.feed(b"the end: sup") == b"the end: "
    assert masker.flush() == b"sup"


def test_mask_document_masks_keys_and_values_and_leaves_the_input_alone() -> None:
    document = {"log": ["run with tok-1234"], "tok-1234": {"n": 3}, "ok": True}
    before = copy.deepcopy(document)

    masked = mask_document(document, ["tok-1234"])

    assert masked == {"log": [f"run with {MASK}"], MASK: {"n": 3}, "ok": True}
    assert document == before


def test_url_credentials_are_masked_but_host_and_path_stay() -> None:
    text = ("failed: https://user:pa55word@pypi.example.com/simple/numpy/ and "
            "https://tok3n@index.example.com/simple/")

    assert mask_url_credentials(text) == (
        f"failed: https://user:{MASK}@pypi.example.com/simple/numpy/ and "
        f"https://{MASK}@index.example.com/simple/"
    )


def test_stripping_a_url_drops_user_info_and_secret_query_parameters() -> None:
    assert strip_url_credentials("https://u:t@host.example/r.git?token=x&ref=main") == (
        "https://host.example/r.git?ref=main")
    assert strip_url_credentials(
        "https://bucket.example/data?X-Amz-Signature=abc&part=1") == (
        "https://bucket.example/data?part=1")
    assert strip_url_credentials("https://host.example/r.git?ref=main") == (
        "https://host.example/r.git?ref=main")


def test_an_scp_style_remote_keeps_its_user_name_but_loses_a_password() -> None:
    assert strip_url_credentials("git@github.com:o/r.git") == "git@github.com:o/r.git"
    assert strip_url_credentials("user:pass@host.example:o/r.git") == "host.example:o/r.git"
