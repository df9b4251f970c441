"""GitHub's answers read into typed values: a field that is missing or of another type than the
REST description says is one `GitHubAnswerError` naming it, never a KeyError further on.

    fields = json_object(response, "POST", path)
    runner = fields.object("runner")
    runner_id = runner.integer("id")
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NoReturn

import requests

from repro_gate.errors import GitHubAnswerError


def json_body(response: requests.Response, method: str, path: str) -> Any:
    """The answer's body as JSON; GitHubAnswerError when it is empty or not JSON."""
    if not response.content:
        raise GitHubAnswerError(method, path, response.status_code, "the answer is empty")
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python parses
        raise GitHubAnswerError(method, path, response.status_code,
                                "the answer is not JSON") from None


def json_object(response: requests.Response, method: str, path: str) -> Fields:
    """The answer's body, which must be one JSON object."""
    return Fields.of(json_body(response, method, path), "the answer", method, path,
                     response.status_code)


@dataclass(frozen=True)
class Fields:
    """One JSON object of an answer; `where` names it in errors (`the answer`, `runners[3]`)."""

    data: dict[str, Any]
    where: str
    method: str
    path: str
    status: int

    @classmethod
    def of(cls, value: object, where: str, method: str, path: str, status: int) -> Fields:
        if not isinstance(value, dict):
            raise GitHubAnswerError(method, path, status,
                                    f"{where} is {_kind(value)}, not a JSON object")
        return cls(value, where, method, path, status)

    def _get(self, key: str, wanted: type, described: str) -> Any:
        if key not in self.data:
            self._refuse(f"holds no {key}")
        value = self.data[key]
        # true and false are Python ints, never JSON numbers
        if not isinstance(value, wanted) or (isinstance(value, bool) and wanted is not bool):
            self._refuse(f"has {key} as {_kind(value)}, not {described}")
        return value

    def _refuse(self, problem: str) -> NoReturn:
        raise GitHubAnswerError(self.method, self.path, self.status, f"{self.where} {problem}")

    def text(self, key: str) -> str:
        """A non-empty string."""
        value: str = self._get(key, str, "a string")
        if not value:
            self._refuse(f"has an empty {key}")
        return value

    def integer(self, key: str) -> int:
        """A whole number above 0 (an ID)."""
        value: int = self._get(key, int, "a whole number")
        if value <= 0:
            self._refuse(f"has {key} {value}, not an ID")
        return value

    def boolean(self, key: str) -> bool:
        value: bool = self._get(key, bool, "true or false")
        return value

    def time(self, key: str) -> float:
        """An ISO 8601 time (`2026-11-23T16:00:00Z`) as epoch seconds."""
        text = self.text(key)
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
        except (ValueError, OverflowError, OSError):
            self._refuse(f"has {key} {text[:40]!r}, not a time")

    def object(self, key: str) -> Fields:
        return Fields.of(self._get(key, dict, "a JSON object"), f"{self.where}'s {key}",
                         self.method, self.path, self.status)

    def objects(self, key: str) -> list[Fields]:
        """A list of JSON objects."""
        items: list[Any] = self._get(key, list, "a list")
        return [Fields.of(item, f"{key}[{i}]", self.method, self.path, self.status)
                for i, item in enumerate(items)]


def _kind(value: object) -> str:
    """What a JSON value is, for an error: `a list`, `null`, `a string`."""
    if value is None:
        return "null"
    names = {bool: "true or false", int: "a number", float: "a number", str: "a string",
             list: "a list", dict: "a JSON object"}
    return names.get(type(value), type(value).__name__)
