"""GitHub's answers read into typed values: each field missing or of the wrong type is one
GitHubAnswerError that names it."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import pytest
import requests

from repro_gate.errors import GitHubAnswerError
from repro_gate.publish.github.answers import Fields, json_body, json_object

PATH = "/repos/octo-org/trainer/actions/runners"


def answer(body: bytes | Any, status: int = 200) -> requests.Response:
    """A response as `requests` builds it from the wire: status and body bytes."""
    response = requests.Response()
    response.status_code = status
    response._content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return response


def fields(data: Any) -> Fields:
    return json_object(answer(data), "GET", PATH)


def test_the_body_is_parsed_as_json() -> None:
    assert json_body(answer([{"id": 1}]), "GET", PATH) == [{"id": 1}]


@pytest.mark.parametrize(("body", "problem"), [
    (b"", "the answer is empty"),
    (b"<html>rate limited</html>", "the answer is not JSON"),
    (b"[" * 100_000, "the answer is not JSON"),  # deeper than Python parses
])
def test_an_empty_or_unparsable_body_is_refused(body: bytes, problem: str) -> None:
    with pytest.raises(GitHubAnswerError) as caught:
        json_body(answer(body, 502), "GET", PATH)
    assert str(caught.value) == f"GET {PATH}: HTTP 502: {problem}"
    assert caught.value.status == 502


def test_an_answer_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(GitHubAnswerError, match="the answer is a list, not a JSON object"):
        fields([1, 2])


def test_typed_fields_are_read() -> None:
    answer_fields = fields({"id": 7, "name": "gpu-1", "busy": False,
                            "created_at": "2026-11-23T16:00:00Z"})
    assert answer_fields.integer("id") == 7
    assert answer_fields.text("name") == "gpu-1"
    assert answer_fields.boolean("busy") is False
    expected = datetime(2026, 11, 23, 16, tzinfo=timezone.utc).timestamp()
    assert answer_fields.time("created_at") == expected


@pytest.mark.parametrize(("data", "read", "problem"), [
    ({}, "integer", "the answer holds no id"),
    ({"id": "7"}, "integer", "the answer has id as a string, not a whole number"),
    ({"id": True}, "integer", "the answer has id as true or false, not a whole number"),
    ({"id": 0}, "integer", "the answer has id 0, not an ID"),
    ({"id": None}, "text", "the answer has id as null, not a string"),
    ({"id": ""}, "text", "the answer has an empty id"),
    ({"id": 1}, "boolean", "the answer has id as a number, not true or false"),
    ({"id": "yesterday"}, "time", "the answer has id 'yesterday', not a time"),
])
def test_a_field_of_the_wrong_kind_is_named(data: dict[str, Any], read: str,
                                            problem: str) -> None:
    with pytest.raises(GitHubAnswerError) as caught:
        getattr(fields(data), read)("id")
    assert str(caught.value) == f"GET {PATH}: HTTP 200: {problem}"


def test_nested_objects_are_named_by_where_they_are() -> None:
    data = {"runner": {"id": 3, "labels": [{"name": "gpu"}, "cpu"]}}
    runner = fields(data).object("runner")
    assert runner.integer("id") == 3
    with pytest.raises(GitHubAnswerError, match="labels\\[1\\] is a string, not a JSON object"):
        runner.objects("labels")
    with pytest.raises(GitHubAnswerError, match="the answer's runner holds no os"):
        runner.text("os")


def test_a_list_of_objects_keeps_each_ones_position() -> None:
    runners = fields({"runners": [{"id": 1}, {"id": -2}]}).objects("runners")
    assert runners[0].integer("id") == 1
    with pytest.raises(GitHubAnswerError, match=r"runners\[1\] has id -2, not an ID"):
        runners[1].integer("id")
