"""No input of any shape gives a traceback: random flags, configs and files fed to the real CLI.

Every example runs `repro_gate.cli.main.main(argv)` in-process (`check` still starts its real
training subprocesses) and asserts:

- the exit code is 0, 1 or 2 (argparse's own `SystemExit(2)` with its usage counts as 2);
- no "Traceback (most recent call last)" on stdout or stderr, and no exception escapes `main`;
- on exit 2 with no run made, stderr's error output is one line starting `repro-gate: error:`
  (or argparse's usage followed by its one `repro-gate COMMAND: error:` line).

The flags of `check` come from the real parser (`build_parser()`), so a flag added there is fuzzed
without touching this file. Values are good, boundary and hostile ones; paths stay inside a
per-example directory (a glob or data path of `/` would walk the whole disk), the training is
always one that exits at once, and outside services are out of reach: DOCKER_HOST names a socket
that does not exist, GitHub and the Pushgateway point at a closed local port.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import hypothesis.errors
import pytest
import yaml
from helpers.paths import ROOT
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from repro_gate.cli.main import build_parser, main

TRACEBACK = "Traceback (most recent call last)"
# main()'s last resort for an exception nobody expected: no traceback, but still a bug.
INTERNAL_ERROR = "repro-gate: internal error:"
CLOSED_PORT_URL = "http://127.0.0.1:9"
SCHEMA = json.loads(
    (ROOT / "src/repro_gate/schemas/config.schema.json").read_text()
)
FUZZ_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": list(HealthCheck),
}

# --- running the CLI in-process ------------------------------------------------------------


def invoke(argv: list[str]) -> tuple[int, str, str]:
    """`main(argv)` with stdout/stderr encoded as a real UTF-8 process would encode them.

    stdout is strict (a lone surrogate printed there is a crash, as in a terminal), stderr uses
    backslashreplace like Python's own stderr.
    """
    out_bytes, err_bytes = io.BytesIO(), io.BytesIO()
    out = io.TextIOWrapper(out_bytes, encoding="utf-8", errors="strict", write_through=True)
    err = io.TextIOWrapper(err_bytes, encoding="utf-8", errors="backslashreplace",
                           write_through=True)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code: Any = main(argv)
        except SystemExit as exit_:  # argparse: usage and exit 2 (or 0 for --help)
            code = 0 if exit_.code is None else exit_.code
        out.flush()
        err.flush()
    return code, out_bytes.getvalue().decode("utf-8"), err_bytes.getvalue().decode("utf-8")


def assert_clean(argv: list[str], code: Any, out: str, err: str, ran: bool) -> None:
    with contextlib.suppress(hypothesis.errors.InvalidArgument):  # outside @given
        event(f"{argv[0]}: exit {code}{' after runs' if ran else ''}")
    shown = f"argv={argv!r}\nexit={code!r}\nstdout={out[-2000:]}\nstderr={err[-2000:]}"
    assert code in (0, 1, 2), shown
    assert TRACEBACK not in out, shown
    assert TRACEBACK not in err, shown
    assert INTERNAL_ERROR not in err, shown
    if code != 2 or ran:
        return
    # Lines as a terminal shows them: str.splitlines would also split at \x1c-\x1e, \x85, \u2028.
    lines = [line for line in re.split(r"\r\n|\n|\r", err)
             if line.strip() and not line.startswith("repro-gate: warning:")]
    if not lines:  # the gate decided `error` itself (e.g. command not found) and reported it
        assert out.strip(), shown
    elif lines[0].startswith("usage:"):
        assert re.match(r"repro-gate( \w+)?: error: ", lines[-1]), shown
    else:
        assert len(lines) == 1, shown
        assert lines[0].startswith("repro-gate: error:"), shown


@pytest.fixture
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No GitHub/Actions context, no Docker daemon, no reachable services; quick push retries."""
    for key in list(os.environ):
        if key.startswith(("GITHUB_", "INPUT_", "RUNNER_", "REPRO_GATE_", "ACTIONS_")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-docker.sock")
    monkeypatch.setenv("GITHUB_API_URL", CLOSED_PORT_URL)
    monkeypatch.setenv("NO_PROXY", "*")
    from repro_gate.publish.metrics import pushgateway

    monkeypatch.setattr(pushgateway, "BACKOFF_SECONDS", (0.0, 0.0))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@contextlib.contextmanager
def example_dir(base: Path):
    """A fresh `root/d1/d2/d3/project` per example, cwd inside; `..` paths stay within `root`."""
    root = Path(tempfile.mkdtemp(dir=base))
    work = root / "d1" / "d2" / "d3" / "project"
    work.mkdir(parents=True)
    (work / "empty.txt").write_text("")
    (work / "bytes.bin").write_bytes(bytes(range(256)) * 4)
    (work / "wrong.json").write_text('[1, "two", {"three": null}]')
    (work / "sub").mkdir()
    (work / "write.py").write_text(
        "import os\n"
        "run_dir = os.environ.get('REPRO_GATE_RUN_DIR', '.')\n"
        "open(os.path.join(run_dir, 'out.txt'), 'w').write('same every time')\n"
    )
    previous = Path.cwd()
    os.chdir(work)
    try:
        yield work
    finally:
        os.chdir(previous)


# --- values --------------------------------------------------------------------------------

NO_SURROGATES_OR_NUL = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
HOSTILE_TEXT = [
    "", " ", "0", "-1", "nan", "NaN", "inf", "-inf", "1e309", "None", "null", "true", "~",
    "..", "/", "/nonexistent/x", "*", "**", "[", "[!]", "?", "{a,b}", "a\nb", "\n", "\t", "\r\n",
    "x" * 5000, "é漢字🙂", "\u202e", "\udcff", "-", "--", "-x", "=", "a=b", "'", '"', "\\",
    "$HOME", "`id`", "%s%n", "a,b,,", "all", "none", "http://", CLOSED_PORT_URL,
]
# Paths: hostile, but never able to reach the root of the disk (data is hashed, globs walked).
SAFE_PATHS = [
    "", ".", "..", "../..", "../../../..", "missing", "missing/deeper", "empty.txt", "bytes.bin",
    "wrong.json", "sub", "sub/../empty.txt", "../project/empty.txt", "*", "*.txt", "[", "[a-", "?",
    "a\nb", "é漢字🙂", "\udcff", "-", "~", "~/x", "n" * 300, "./" * 300 + "empty.txt",
    "/nonexistent/abs", "/dev/null", "{work}/empty.txt", "{work}/missing", "{work}",
    "{good_manifest}",
]
GLOBS = [*SAFE_PATHS, "**/*", "**", "../*", "**/../*", "/etc/*", "/nonexistent/*", "[]", "***",
         "{", "\\", "out.txt", "*/*.pt"]
INT_TEXT = ["0", "-1", "1", "2", "3", "4294967295", "4294967296", str(10**30), "1.5", " 3 ",
            "\u0663", "0x10", "1_000", "nan", "", "abc"]
FLOAT_TEXT = ["nan", "inf", "-inf", "0", "-0", "1e-300", "1e308", "1e309", "0.5", "30", "-1",
              "", "abc", "0x1p-3", "\u0661.\u0665"]
# Good values for flags whose meaning needs more than random text.
FLAG_VALUES: dict[str, list[str]] = {
    "tolerance": ["bitwise", " bitwise ", "atol=1e-6,rtol=0", "atol=nan", "atol=inf,rtol=-1",
                  "atol=", "rtol=1,rtol=2", "atol=1e309", "tol=1", ",", "atol=1,,"],
    "env": ["A=B", "=x", "noeq", "PATH=", "A=\n", "A==", "PYTHONPATH=/nonexistent", "É=1",
            "LD_PRELOAD=/nonexistent.so", "A B=c"],
    "gpus": ["all", "none", "0", "2", "-1", "0,1", "GPU-abc", ",", "\n", "99999999999999999999"],
    "image": ["alpine@sha256:" + "0" * 64, "UPPER:case", "a" * 300, "name@sha256:xyz"],
    "memory": ["8g", "0", "-1g", "1e9"],
    "user": ["1000:1000", "root", ":"],
    "pushgateway_url": [CLOSED_PORT_URL, "ftp://x", "http://[::1", "http://",
                        "http://user:pass@127.0.0.1:9/x?y#z"],
    "runs": ["2", "3", "0", "1", "-2", "nan", "2.0"],  # never a huge valid count: it would run
}
PATH_DESTS = {"config", "workdir", "data", "baseline"}
GLOB_DESTS = {"artifacts"}
FIXED_DESTS = {"help", "output_dir", "quiet", "trailing_command", "command_line"}


def text_values(extra: list[str] | None = None) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from([*(extra or []), *HOSTILE_TEXT]),
        st.text(NO_SURROGATES_OR_NUL, max_size=30),
    )


def path_values(globs: bool = False) -> st.SearchStrategy[str]:
    component = st.text(
        st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00/"), max_size=20)
    return st.one_of(st.sampled_from(GLOBS if globs else SAFE_PATHS), component)


def materialize(value: Any, work: Path, good: dict[str, Any] | None = None) -> Any:
    """Fill in `{work}` (the example's directory) and `{good_manifest}`, recursively."""
    if isinstance(value, str):
        value = value.replace("{work}", str(work))
        if good is not None:
            value = value.replace("{good_manifest}", str(good["out"] / "manifest.json"))
        return value
    if isinstance(value, list):
        return [materialize(v, work, good) for v in value]
    if isinstance(value, dict):
        return {materialize(k, work, good): materialize(v, work, good) for k, v in value.items()}
    return value


def check_actions() -> list[argparse.Action]:
    parser = build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in subparsers.choices["check"]._actions if a.dest not in FIXED_DESTS]


def flag_strategy(action: argparse.Action) -> st.SearchStrategy[list[str]]:
    """Zero or more occurrences of one option, always `--opt=value` so values may start with -."""
    option = max(action.option_strings, key=len)
    if action.nargs == 0:  # store_true and BooleanOptionalAction
        return st.sampled_from([[option_string] for option_string in action.option_strings])
    if action.dest in FLAG_VALUES:
        values = text_values(FLAG_VALUES[action.dest])
    elif action.choices:
        values = st.one_of(st.sampled_from(list(action.choices)), text_values())
    elif action.type is int:
        values = st.one_of(st.sampled_from(INT_TEXT), text_values())
    elif action.type is float:
        values = st.one_of(st.sampled_from(FLOAT_TEXT), text_values())
    elif action.dest in PATH_DESTS:
        values = path_values()
    elif action.dest in GLOB_DESTS:
        values = path_values(globs=True)
    else:
        values = text_values()
    count = st.integers(1, 3) if isinstance(action, argparse._AppendAction) else st.just(1)
    return count.flatmap(lambda n: st.lists(values, min_size=n, max_size=n)).map(
        lambda vs: [f"{option}={v}" for v in vs])


# Values the schema accepts, for examples that should get as far as the runs.
VALID_FLAG_VALUES: dict[str, list[str]] = {
    "tolerance": ["bitwise", "atol=1e-6,rtol=0", "atol=0"], "env": ["A=B", "EMPTY="],
    "gpus": ["all", "none", "0"], "runs": ["2", "3"], "seed": ["0", "4294967295", "7"],
    "timeout": ["30", "1e308"], "report_timeout": ["5"], "cost_steps": ["0", "3"],
    "cost_warmup": ["0", "99"], "steps": ["1"], "batch_size": ["1"], "width": ["1"],
    "pids": ["1"], "name": ["gate-1"], "artifacts": ["out.txt", "*.txt", "**/*", "missing.pt"],
    "data": ["empty.txt", "sub", "{work}/bytes.bin"], "workdir": [".", "{work}"],
    "baseline": ["{good_manifest}"], "determinism": ["warn", "strict"],
    "metrics_job": ["job"], "runner_slot": ["slot"], "pushgateway_url": [CLOSED_PORT_URL],
}
# Flags a valid example leaves out: they need Docker or a file that only may exist.
NOT_IN_VALID = {"image", "network", "memory", "user", "config", "env_allow"}


def valid_flag_strategy(action: argparse.Action) -> st.SearchStrategy[list[str]] | None:
    option = max(action.option_strings, key=len)
    if action.nargs == 0:
        return st.sampled_from([[option_string] for option_string in action.option_strings])
    if action.dest in VALID_FLAG_VALUES:
        return st.sampled_from(VALID_FLAG_VALUES[action.dest]).map(lambda v: [f"{option}={v}"])
    if action.choices:
        return st.sampled_from(list(action.choices)).map(lambda v: [f"{option}={v}"])
    return None


@st.composite
def check_flags(draw: st.DrawFn, valid: bool) -> list[str]:
    """Valid flags, plus (unless `valid`) one flag with a hostile value: one bad value at a time,
    so that it is not hidden behind another one the gate rejects first."""
    actions = check_actions()
    good = [a for a in actions
            if a.dest not in NOT_IN_VALID and valid_flag_strategy(a) is not None]
    chosen = draw(st.lists(st.sampled_from(good), max_size=4, unique_by=lambda a: a.dest))
    flags: list[str] = []
    for action in chosen:
        flags.extend(draw(valid_flag_strategy(action)))
    if not valid:
        flags.extend(draw(flag_strategy(draw(st.sampled_from(actions)))))
    return flags


# --- configuration documents ---------------------------------------------------------------

ANY_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
              st.floats(allow_nan=True, allow_infinity=True),
              st.text(NO_SURROGATES_OR_NUL, max_size=10)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8).filter(
                                lambda s: not any(0xD800 <= ord(c) <= 0xDFFF for c in s)),
                                inner, max_size=3)),
    max_leaves=8,
)
NUMBERS = [0, -1, 1, 0.5, 1e-300, float("nan"), float("inf"), -float("inf"), 10**400, 2.0, True]
GOOD_CONFIG_VALUES: dict[str, list[Any]] = {
    "name": ["gate-1", "a.b_c", "bad name", "", "x" * 300],
    "command": [["python", "-c", "pass"], "python -c pass", "'unterminated", "", [], [""], [1]],
    "seed": [0, 4294967295, 4294967296, -1, 2**64, 1.0, 0.5, float("nan")],
    "runs": [2, 3, 0, 1, -1, 2.0, 2.5, float("nan"), float("inf"), "2"],
    "tolerance": ["bitwise", "atol=1", {}, {"atol": 1e-6}, {"atol": float("nan")},
                  {"atol": float("inf"), "rtol": 0}, {"per_artifact": [{"glob": "*"}]},
                  {"per_artifact": [{"glob": "[", "atol": 1e-3}, {"glob": "/etc/*"}]},
                  {"per_artifact": [{"atol": 1}]}, {"rtol": -1}, {"atol": 10**400}],
    "timeout": NUMBERS,
    "env": [{"A": "b"}, {"": "x"}, {"A=B": "x"}, {"A": "\x00"}, {1: "x"}, {"PATH": ""},
            {"A": 1}, {None: "x"}, {"A": "é漢字🙂"}, {"A\x00": "x"}],
    "determinism": ["warn", "strict", "Warn", ""],
    "cost": [{"enabled": True, "steps": 0, "warmup": 0, "noise_floor": True},
             {"steps": -1}, {"warmup": 10**400}, {"enabled": "yes"}],
    "fail_fast": [True, False, "false", 0],
    "allow_fork_pull_requests": [True, False, "true"],
    "upgrade": [{"lock": "uv.lock", "inherit_site_packages": True, "tolerance": {"atol": 1e-6},
                 "max_bisect_runs": 1, "cache_dir": "envs"},
                {"max_bisect_runs": 0}, {"tolerance": "exact"}, {"lock": ""}, {"other": 1}],
    "device": ["auto", "cpu", "cuda", "tpu"],
    "reference": [{"steps": 1, "batch_size": 1, "width": 1}, {"steps": 0}, {"width": 10**400}],
    "gpus": ["all", "none", 0, 3, -1, ["0"], [], [""], ["GPU-x", 1]],
    "image": ["alpine@sha256:" + "0" * 64, "UPPER", "-x", "a b"],
    "network": ["none", "host", "bridge", "-", "a" * 300],
    "container": [{"memory": "8g", "pids": 1, "user": "0:0", "keep": True, "env_allow": ["A"]},
                  {"pids": 0}, {"pids": 10**400}, {"env_allow": [""]}],
    "report": [{"enabled": True, "check_run": True, "status": "always", "comment": True,
                "error_conclusion": "neutral", "timeout": float("nan")},
               {"timeout": 0}, {"timeout": float("inf")}, {"status": "sometimes"}],
    "metrics": [{"pushgateway_url": CLOSED_PORT_URL, "job": "j", "runner_slot": "s"},
                {"pushgateway_url": "not a url"}, {"pushgateway_url": "http://"},
                {"job": "", "runner_slot": "x" * 1000}, {"pushgateway_url": "ftp://x"}],
    "output_dir": ["out", "", "/nonexistent/out", "{work}/empty.txt"],
    "resume": [{"after": 1}, {"after": 2, "command": "python write.py"}, {"after": 0},
               {"command": "x"}, {"after": 1, "other": 1}],
    "golden": ["golden/", {"path": "g.json", "on_change": "warn"}, "", {"on_change": "maybe"},
               {"tolerance": {"loss": {"rtol": -1}}}],
    "vary": ["all", "threads, path", ["time", "all"],
             {"factors": ["hostname"], "on_change": "warn"}, "colour", ["threads,"],
             {"factors": "all"}, {"on_change": "maybe"}, 3],
    "compare": [{"ignore": [{"glob": "*.json", "fields": ["finished_at", "runs.*.timestamp"]}]},
                {"ignore": [{"glob": "*", "fields": ["**", "[*]", "a..b", ""]}]},
                {"ignore": [{"glob": "", "fields": []}]}, {"ignore": "x"}, {"other": 1}],
}


def config_value(key: str) -> st.SearchStrategy[Any]:
    if key in ("workdir", "baseline"):
        good: st.SearchStrategy[Any] = path_values()
    elif key == "data":
        good = st.lists(path_values(), max_size=3)
    elif key == "artifacts":
        good = st.lists(path_values(globs=True), max_size=3)
    else:
        good = st.sampled_from(GOOD_CONFIG_VALUES[key])
    return st.one_of(good, good, good, ANY_JSON)


VALID_CONFIG_VALUES: dict[str, list[Any]] = {
    "name": ["gate-1"], "seed": [0, 4294967295], "runs": [2, 3], "timeout": [30, 0.5e3],
    "tolerance": ["bitwise", {"atol": 0.0, "rtol": 1e-6, "per_artifact": [{"glob": "*.txt"}]}],
    "env": [{"A": "b", "EMPTY": ""}], "determinism": ["warn", "strict"],
    "cost": [{"enabled": True, "steps": 0, "warmup": 0, "noise_floor": True}],
    "fail_fast": [True, False], "device": ["auto", "cpu"],
    "allow_fork_pull_requests": [True, False],
    "reference": [{"steps": 1, "batch_size": 1, "width": 1}], "gpus": ["none", 0],
    "report": [{"enabled": True, "status": "never", "timeout": 1}],
    "metrics": [{"pushgateway_url": CLOSED_PORT_URL, "job": "j", "runner_slot": "s"}],
    "output_dir": ["out"], "workdir": [".", "{work}"], "data": [["empty.txt", "sub"]],
    "artifacts": [["out.txt"], ["*.txt", "**/*"]], "baseline": ["{good_manifest}"],
    "compare": [{"ignore": [{"glob": "out*", "fields": ["finished_at", "**.host"]}]}],
}


@st.composite
def config_mapping(draw: st.DrawFn, valid: bool = False) -> dict[Any, Any]:
    """Valid keys, plus (unless `valid`) one key with a hostile value and maybe unknown keys."""
    keys = draw(st.lists(st.sampled_from(sorted(VALID_CONFIG_VALUES)), max_size=4, unique=True))
    document: dict[Any, Any] = {key: draw(st.sampled_from(VALID_CONFIG_VALUES[key]))
                                for key in keys}
    if valid:
        return document
    key = draw(st.sampled_from(sorted(SCHEMA["properties"])))
    document[key] = draw(config_value(key))
    for _ in range(draw(st.sampled_from([0, 0, 0, 0, 1, 2]))):  # unknown keys, maybe not str
        document[draw(st.sampled_from(["unknown", 1, None, 2.5, True, "Name", ""]))] = 1
    return document


def deep(n: int, opener: str, closer: str, leaf: str = "1") -> str:
    return opener * n + leaf + closer * n


RAW_CONFIG_TEXTS = [
    "", "   \n", "---\n---\n", "[1, 2]", "42", "'str'", "null", "~", "true",
    "!!python/object/apply:os.system ['true']", ": : :", "\t- x", "a: [", "a: *unknown",
    "name: a\nname: b", "? [a]\n: 1", "1: x\nname: y", "null: x\nname: y", "2024-01-01: x",
    "timeout: 2024-01-01", "env: {A: 2024-01-01}", "seed: 0x10", "runs: 0b11", "timeout: .nan",
    "timeout: .inf", "runs: .inf", "seed: !!float 1", "env: !!binary aGVsbG8=",
    "\ufeffname: x", "name: x\x85y", "a: &a [*a]", "%YAML 9.9\n---\nname: x",
    "x: &a [1,1,1,1]\ny: &b [*a,*a,*a,*a]\nz: &c [*b,*b,*b,*b]\nw: [*c,*c,*c,*c]",
    deep(50, "[", "]"), deep(1000, "[", "]"), deep(5000, "[", "]"),
    deep(1000, "{a: ", "}"), deep(3000, "- ", "", ""), deep(2000, "env: {A: ", "}"),
    "tolerance:\n" + "  " * 400 + "atol: 1",
]


@st.composite
def config_file(draw: st.DrawFn, valid: bool) -> bytes | dict[Any, Any] | None:
    """What `.repro-gate.yml` holds: nothing, a YAML mapping, raw hostile text, random bytes."""
    if valid:
        return draw(st.one_of(st.none(), config_mapping(valid=True)))
    kind = draw(st.sampled_from(["none", "mapping", "mapping", "mapping", "raw", "bytes",
                                 "top"]))
    if kind == "none":
        return None
    if kind == "mapping":
        return draw(config_mapping())
    if kind == "raw":
        return draw(st.sampled_from(RAW_CONFIG_TEXTS)).encode("utf-8")
    if kind == "bytes":
        return draw(st.binary(max_size=64))
    return yaml.safe_dump(draw(ANY_JSON), allow_unicode=True).encode("utf-8")


def write_config(work: Path, content: bytes | dict[Any, Any] | None,
                 good: dict[str, Any]) -> None:
    if isinstance(content, dict):
        text = yaml.safe_dump(materialize(content, work, good), allow_unicode=True, sort_keys=False)
        (work / ".repro-gate.yml").write_text(text, encoding="utf-8")
    elif content is not None:
        (work / ".repro-gate.yml").write_bytes(content)


TRAININGS = {
    "pass": [sys.executable, "-c", "pass"],  # nothing to compare: exit 2 after two runs
    "write": [sys.executable, "write.py"],  # one small artifact: pass
    "missing": ["repro-gate-no-such-command"],  # command not found
}


def read_manifest(out_dir: Path) -> dict[str, Any]:
    try:
        document = json.loads((out_dir / "manifest.json").read_text())
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


# --- check ---------------------------------------------------------------------------------


@settings(max_examples=120, **FUZZ_SETTINGS)
@given(data=st.data(), valid=st.sampled_from([False, False, True]),
       training=st.sampled_from(["write", "write", "pass", "missing"]))
def test_check_never_gives_a_traceback(isolated: Path, good_documents: dict[str, Any],
                                       data: st.DataObject, valid: bool, training: str) -> None:
    """A third valid (these get to the runs, the comparison, publishing); the others have one
    hostile part: a flag, a config value, or the whole config file."""
    hostile_part = "none" if valid else data.draw(st.sampled_from(["flag", "config"]))
    flags = data.draw(check_flags(valid=hostile_part != "flag"), label="flags")
    content = data.draw(config_file(valid=hostile_part != "config"), label="config")
    with example_dir(isolated) as work:
        write_config(work, content, good_documents)
        out_dir = work / "fuzz-out"
        argv = ["check", *materialize(flags, work, good_documents), "--no-cost", "--quiet",
                "--no-report", "-o", str(out_dir), "--", *TRAININGS[training]]
        code, out, err = invoke(argv)
        document = read_manifest(out_dir)
        assert_clean(argv, code, out, err, ran=bool(document.get("runs")))
        internal = [r for r in document.get("reasons") or [] if r.get("code") == "internal"]
        assert not internal, f"argv={argv!r}\nreasons={internal!r}"


# --- the other commands --------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real passing manifest (with its output directory) and a real fingerprint document."""
    base = tmp_path_factory.mktemp("fuzz-good")
    previous = Path.cwd()
    os.chdir(base)
    saved = {k: os.environ.pop(k) for k in list(os.environ)
             if k.startswith(("GITHUB_", "INPUT_", "REPRO_GATE_"))}
    try:
        (base / "write.py").write_text(
            "import os\nopen(os.path.join(os.environ.get('REPRO_GATE_RUN_DIR', '.'),"
            " 'out.txt'), 'w').write('x')\n")
        code, out, err = invoke(["check", "--no-cost", "--quiet", "--no-report", "-o", "out",
                                 "-a", "out.txt", "--", sys.executable, "write.py"])
        assert code == 0, out + err
        code, fingerprint, err = invoke(["fingerprint", "--json", "--no-hash-data"])
        assert code == 0, err
    finally:
        os.chdir(previous)
        os.environ.update(saved)
    return {"manifest": json.loads((base / "out" / "manifest.json").read_text()),
            "fingerprint": json.loads(fingerprint), "out": base / "out"}


@st.composite
def document_mutation(draw: st.DrawFn, document: dict[str, Any]) -> Any:
    """A real document, then a few random changes: version, dropped keys, wrong-typed values."""
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(0, 3))):
        action = draw(st.sampled_from(["version", "drop", "replace", "nested"]))
        keys = sorted(doc)
        if action == "version":
            doc["schema_version"] = draw(st.one_of(
                st.sampled_from([1, 2, 3, 0, -1, 10**30, "2", 2.0, True, None, []]), ANY_JSON))
        elif action == "drop" and keys:
            doc.pop(draw(st.sampled_from(keys)))
        elif action == "replace" and keys:
            doc[draw(st.sampled_from(keys))] = draw(ANY_JSON)
        elif action == "nested" and keys:
            key = draw(st.sampled_from(keys))
            if isinstance(doc[key], dict) and doc[key]:
                doc[key][draw(st.sampled_from(sorted(doc[key])))] = draw(ANY_JSON)
            elif isinstance(doc[key], list) and doc[key]:
                doc[key][draw(st.integers(0, len(doc[key]) - 1))] = draw(ANY_JSON)
    return doc


REPORT_TIMEOUTS = ["nan", "-1", "0", "1e-9", "0.05", "", "abc"]
FILE_KINDS = ["missing", "empty", "bytes", "wrong_json", "any_json", "manifest", "manifest",
              "fingerprint", "fingerprint", "directory", "out_dir", "yaml", "raw_yaml", "path"]


@st.composite
def input_file(draw: st.DrawFn, good: dict[str, Any]) -> tuple[str, Any]:
    """(kind, payload) for one input path, made into a file by `make_input`."""
    kind = draw(st.sampled_from(FILE_KINDS))
    if kind == "bytes":
        return kind, draw(st.binary(max_size=64))
    if kind == "any_json":
        return kind, draw(ANY_JSON)
    if kind in ("manifest", "fingerprint"):
        return kind, draw(document_mutation(good[kind]))
    if kind == "yaml":
        return kind, draw(config_mapping())
    if kind == "raw_yaml":
        return kind, draw(st.sampled_from(RAW_CONFIG_TEXTS))
    if kind == "path":
        return kind, draw(path_values())
    return kind, None


def make_input(work: Path, name: str, spec: tuple[str, Any], good: dict[str, Any]) -> str:
    kind, payload = spec
    path = work / name
    if kind == "missing":
        return str(path)
    if kind == "path":
        return materialize(payload, work, good)
    if kind == "directory":
        path.mkdir()
        return str(path)
    if kind == "out_dir":
        return str(good["out"])
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "bytes":
        path.write_bytes(payload)
    elif kind == "wrong_json":
        path.write_text('[1, "two", {"three": null}]')
    elif kind == "yaml":
        path.write_text(yaml.safe_dump(materialize(payload, work, good), allow_unicode=True),
                        encoding="utf-8")
    elif kind == "raw_yaml":
        path.write_text(payload, encoding="utf-8")
    else:  # JSON documents; allow_nan writes NaN/Infinity like Python does
        path.write_text(json.dumps(payload), encoding="utf-8")
    return str(path)


@st.composite
def other_command(draw: st.DrawFn, good: dict[str, Any]) -> tuple[str, list[Any], list[str]]:
    """(command, input specs, extra flags); the inputs become paths in `make_input`."""
    command = draw(st.sampled_from(["compare", "diff", "push", "report", "fingerprint",
                                    "doctor"]))
    flags: list[str] = []
    if draw(st.booleans()) and command in ("compare", "diff", "fingerprint", "doctor"):
        flags.append("--json")
    if command == "compare":
        inputs = [draw(input_file(good)), draw(input_file(good))]
        if draw(st.booleans()):
            flags.append(f"--tolerance={draw(text_values(FLAG_VALUES['tolerance']))}")
        for glob in draw(st.lists(path_values(globs=True), max_size=2)):
            flags.append(f"--artifacts={glob}")
    elif command == "diff":
        inputs = [draw(input_file(good)), draw(input_file(good))]
    elif command == "push":
        inputs = [draw(input_file(good))]
        if draw(st.booleans()):
            flags.append(f"--url={draw(text_values(FLAG_VALUES['pushgateway_url']))}")
        if draw(st.booleans()):
            flags.append("--force")
    elif command == "report":
        inputs = [draw(input_file(good))]
        if draw(st.booleans()):
            flags.append(f"--sha={draw(text_values(['a' * 40, 'A' * 64, '0' * 39]))}")
        if draw(st.booleans()):
            flags.append(f"--pr={draw(st.one_of(st.sampled_from(INT_TEXT), text_values()))}")
        if draw(st.booleans()):
            flags.append(f"--repo={draw(text_values(['owner/name', 'a/b/c', '/']))}")
        if draw(st.booleans()):
            # Bounded: with a token and repository the client retries a closed port for that long.
            timeout = draw(st.sampled_from(REPORT_TIMEOUTS))
            flags.append(f"--timeout={timeout}")
        if draw(st.booleans()):
            flags.append("--token-in-env")  # not a flag: marks the example for a GITHUB_TOKEN
    else:
        inputs = [draw(input_file(good))]
        if draw(st.booleans()):
            flags.append("--no-hash-data" if command == "fingerprint" else "--hash-data")
    return command, inputs, flags


def test_other_commands_never_give_a_traceback(isolated: Path, good_documents: dict[str, Any],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    @settings(max_examples=200, **FUZZ_SETTINGS)
    @given(case=other_command(good_documents))
    def run_case(case: tuple[str, list[Any], list[str]]) -> None:
        command, inputs, flags = case
        with example_dir(isolated) as work, monkeypatch.context() as env:
            if "--token-in-env" in flags:
                flags = [f for f in flags if f != "--token-in-env"]
                env.setenv("GITHUB_TOKEN", "not-a-real-token")
                env.setenv("GITHUB_REPOSITORY", "owner/name")
                env.setenv("GITHUB_SHA", "a" * 40)
            paths = [make_input(work, f"input-{i}", spec, good_documents)
                     for i, spec in enumerate(inputs)]
            flags = materialize(flags, work, good_documents)
            if command in ("compare", "diff"):
                argv = [command, *flags, "--", *paths]
            elif command in ("push", "report"):
                argv = [command, f"--manifest={paths[0]}", *flags]
            else:
                argv = [command, f"--config={paths[0]}", *flags]
            code, out, err = invoke(argv)
            assert_clean(argv, code, out, err, ran=False)

    run_case()


# --- every boundary value once ---------------------------------------------------------------
# Random draws reach a given boundary value of a given key rarely; this sweep gives each of them
# one run, alone in an otherwise valid config (the training writes an artifact, so a good value
# passes).
BOUNDARY_CASES = [(key, value) for key, values in GOOD_CONFIG_VALUES.items() for value in values]


@pytest.mark.parametrize(("key", "value"), BOUNDARY_CASES,
                         ids=[f"{k}-{i}" for i, (k, _) in enumerate(BOUNDARY_CASES)])
def test_each_boundary_config_value(isolated: Path, good_documents: dict[str, Any], key: str,
                                    value: Any) -> None:
    with example_dir(isolated) as work:
        write_config(work, {"artifacts": ["out.txt"], key: value}, good_documents)
        out_dir = work / "fuzz-out"
        argv = ["check", "--no-cost", "--quiet", "--no-report", "-o", str(out_dir), "--",
                *TRAININGS["write"]]
        code, out, err = invoke(argv)
        document = read_manifest(out_dir)
        assert_clean(argv, code, out, err, ran=bool(document.get("runs")))
        internal = [r for r in document.get("reasons") or [] if r.get("code") == "internal"]
        assert not internal, f"{key}={value!r}: reasons={internal!r}"
