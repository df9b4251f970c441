"""Every error repro-gate raises on purpose, and the one-line form of any error.

    ReproGateError                 base of all of them
    ├── GateError                  a problem the user can fix: `kind` and exit code 2
    │   ├── ConfigError            kind `config`
    │   ├── MissingDependencyError kind `missing_dependency`
    │   ├── ReportInputError       kind `report_input`
    │   ├── GitFailedError         kind `git_failed`
    │   ├── ForkRefusedError       kind `fork_pull_request`, exit code 3
    │   ├── RunTamperedError       kind `run_tampered`, exit code 5
    │   └── AttestationError       kind `attestation`: a statement, envelope or key is unusable
    │       └── NotAttestableError a failed gate's statement, refused for signing: exit code 6
    └── PublishError               publishing a verdict failed; it never changes the verdict
        ├── PushError              a Pushgateway push attempt
        └── GitHubError            a GitHub API request
            └── GitHubAnswerError  an answer unlike the API's description, or a URL off the API

A `GateError`'s `kind` is an `ErrorKind`, a closed set: it becomes the manifest's
`reasons[].code`, which the manifest schema lists as an enum (with the verdict's reason codes).

Not here, on purpose: `compare.structured.UnparseableError` and `compare.checkpoints.NotComparable`
are control flow inside the comparison (the file is then compared by bytes) and never reach the
user, so they stay next to the code that raises and catches them.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from enum import Enum

if sys.version_info >= (3, 11):
    from enum import StrEnum
else:  # pragma: no cover - exercised on 3.10 only

    class StrEnum(str, Enum):
        """`enum.StrEnum` of Python 3.11: a member is its value, as a string."""

        def __str__(self) -> str:
            return str(self.value)


EXIT_PASS = 0
EXIT_FAIL = 1
EXIT_ERROR = 2
# The gate refused to run at all (a fork's code on a machine it must not reach): not a broken
# input the author can fix, so a workflow can tell it from an error.
EXIT_REFUSED = 3
# `repro-gate bless` refused a manifest whose runs did not reproduce, or whose steps were not
# observed: nothing to bless.
EXIT_NOT_BLESSABLE = 4
# A run left a link (or something that is no file) where the gate reads its records back: the
# training tried to make the gate read what it did not write, never a bad input to fix.
EXIT_TAMPERED = 5
# `repro-gate attest` refused a failed gate's statement (without --allow-fail): nothing signed.
EXIT_NOT_ATTESTABLE = 6

# The 403 message of a token that may not write (e.g. in a pull request from a fork).
READ_ONLY_MESSAGE = "Resource not accessible by integration"


class ErrorKind(StrEnum):
    """Why the gate gave the verdict `error`: the manifest's `reasons[].code`.

    The values are a contract (manifests record them, users match on them): never rename one.
    """

    # configuration and input
    CONFIG = "config"  # the config file, a flag or an action input is wrong
    MISSING_DEPENDENCY = "missing_dependency"  # an optional package is needed for what was asked
    INPUT = "input"  # `diff`: an input file is not a manifest or fingerprint
    INPUT_MISSING = "input_missing"  # `compare`: no such run directory or manifest
    INPUT_INVALID = "input_invalid"  # `compare`: the input holds nothing to compare
    BASELINE = "baseline"  # the baseline manifest is missing or unreadable
    OUTPUT_DIR = "output_dir"  # the output directory is not writable
    METRICS_CONFIG = "metrics_config"  # `push`: no usable Pushgateway configuration
    REPORT_INPUT = "report_input"  # `report`: the manifest or the target is wrong
    # `attest`, `verify`: a statement, envelope or key is missing, unreadable or not as expected
    ATTESTATION = "attestation"
    # manifests
    MANIFEST_MISSING = "manifest_missing"
    MANIFEST_INVALID = "manifest_invalid"
    MANIFEST_VERSION = "manifest_version"  # written by a newer repro-gate
    # launching and running the training
    COMMAND_NOT_FOUND = "command_not_found"
    DOCKER = "docker"  # the Docker daemon or a container failed
    IMAGE_NOT_FOUND = "image_not_found"
    IMAGE_REQUIRED = "image_required"  # the action's own image cannot run the Python training
    TIMEOUT = "timeout"  # a run took longer than allowed
    RUN_FAILED = "run_failed"  # a run exited non-zero
    PROBE_FAILED = "probe_failed"  # the probe inside a run could not record
    # a run's records or artifacts are links, or lead out of its run folder
    RUN_TAMPERED = "run_tampered"
    # the probe never loaded (python -I/-S, a cleared PYTHONPATH, env -i) in a Python training,
    # or in any training with no artifacts compared: nothing decides
    PROBE_NOT_LOADED = "probe_not_loaded"
    # the resume check: run R wrote no checkpoint at or after `resume.after` before it ended
    NO_CHECKPOINT = "no_checkpoint"
    # comparing
    NO_ARTIFACTS = "no_artifacts"  # the runs wrote none of the configured artifacts
    NOTHING_TO_COMPARE = "nothing_to_compare"
    CHECKPOINT_UNREADABLE = "checkpoint_unreadable"
    GOLDEN = "golden"  # the golden file is unreadable or not a golden trajectory
    # upgrading dependencies (`repro-gate upgrade`)
    LOCKFILE = "lockfile"  # the lockfile is missing, unreadable or not a pinned lock
    LOCK_UNRESOLVABLE = "lock_unresolvable"  # a candidate lock or a mix of pins does not resolve
    ENVIRONMENT = "environment"  # an environment could not be built from the pins
    INDEX_UNREACHABLE = "index_unreachable"  # a package index refused the connection, no DNS
    BASELINE_NOT_REPRODUCIBLE = "baseline_not_reproducible"  # the current lock fails the gate
    # reading the repository: a git command failed (a clone missing an object), not the gate
    GIT_FAILED = "git_failed"
    # the gate itself
    CANCELLED = "cancelled"  # interrupted (Ctrl-C, SIGTERM) before a verdict
    LOCKED = "locked"  # another gate is using the output directory or the working directory
    # a pull request's code from a fork on a self-hosted runner of a public repository, or
    # checked out by pull_request_target (docs/action.md#pull-requests-from-forks)
    FORK_PULL_REQUEST = "fork_pull_request"
    INTERNAL = "internal"  # a bug in repro-gate: an exception nobody expected


class ReproGateError(Exception):
    """Base of every error repro-gate raises on purpose."""


class GateError(ReproGateError):
    """A problem the user can fix; reported as one line, never a traceback."""

    exit_code = EXIT_ERROR

    def __init__(self, message: str, *, kind: ErrorKind, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        # ErrorKind(...) also accepts the plain value; an unknown kind fails here, not later
        # as a manifest that breaks its schema.
        self.kind = ErrorKind(kind)
        self.detail = detail

    def __str__(self) -> str:
        return self.message


class ConfigError(GateError):
    """The configuration is missing, unparseable or against its schema."""

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message, kind=ErrorKind.CONFIG, detail=detail)


class MissingDependencyError(GateError):
    """An optional dependency is needed for what was asked."""

    def __init__(self, what: str, install: str) -> None:
        super().__init__(f"{what} needs {install}", kind=ErrorKind.MISSING_DEPENDENCY)


class ReportInputError(GateError):
    """The manifest or the target of the report is missing or invalid."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.REPORT_INPUT)


class GitFailedError(GateError):
    """A git command the gate needs failed (a clone missing an object): the message is the
    command and `problem`, which says how it failed in git's own words; `stderr` keeps all git
    said, for callers that tell an expected failure (no such remote) from a broken repository."""

    def __init__(self, command: Sequence[str], problem: str, stderr: str = "") -> None:
        super().__init__(f"{shlex.join(command)} {problem}", kind=ErrorKind.GIT_FAILED)
        self.stderr = stderr


class ForkRefusedError(GateError):
    """A fork's code would run where it must not; refused before anything runs."""

    exit_code = EXIT_REFUSED

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.FORK_PULL_REQUEST)


class RunTamperedError(GateError):
    """A file the gate reads back from a run is a link, or no regular file: never followed."""

    exit_code = EXIT_TAMPERED

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.RUN_TAMPERED)


class AttestationError(GateError):
    """A statement, envelope or key that `attest` or `verify` cannot use (exit code 2)."""

    def __init__(self, message: str) -> None:
        super().__init__(message, kind=ErrorKind.ATTESTATION)


class NotAttestableError(AttestationError):
    """A failed gate's statement: `attest` signs it only when told to (its own exit code)."""

    exit_code = EXIT_NOT_ATTESTABLE


class PublishError(ReproGateError):
    """Publishing a verdict failed; it is recorded in the manifest and never changes the verdict."""


class PushError(PublishError):
    """One push attempt failed; `retry` says whether another attempt can help."""

    def __init__(self, message: str, retry: bool = True) -> None:
        super().__init__(message)
        self.retry = retry


class GitHubError(PublishError):
    """A request that failed for good; `status` is None when no answer came back."""

    def __init__(self, method: str, path: str, status: int | None, message: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        self.message = message
        where = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{method} {path}: {where}: {message}")

    @property
    def read_only(self) -> bool:
        """True for the 403 a read-only token gets (e.g. a pull request from a fork)."""
        return self.status == 403 and READ_ONLY_MESSAGE.lower() in self.message.lower()

    @property
    def unavailable(self) -> bool:
        """True when the endpoint refused us (403/404): a fallback may work."""
        return self.status in (403, 404)


class GitHubAnswerError(GitHubError):
    """GitHub's answer is not what the API describes (not JSON, a field missing or of another
    type, too large), or it names a URL outside the configured API: nothing in it is used."""


def printable(text: str) -> str:
    """`text` with control characters (a `\r` in a path the user gave) as escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def one_line(error: BaseException | str, limit: int = 300) -> str:
    """The first non-blank line of an error's text, cut to `limit` characters (ending in …).

    An exception without text gives its type name (`TimeoutError`); an empty string gives "".
    """
    text = str(error).strip()
    if not text:
        return "" if isinstance(error, str) else type(error).__name__
    line = text.splitlines()[0].strip()
    return line if len(line) <= limit else line[: limit - 1] + "…"
