"""Why the numbers changed: the code, or the environment.

Same software as the golden file: the code. The software changed and no file the training runs
changed since the golden file's commit (only locks, docs, workflows, the golden files): the
environment. Both changed: the code run in the golden file's rebuilt software (run G,
`rebuild.py`) decides: equal to the golden trajectory, the environment; else the code. Where it
cannot be rebuilt, `unknown` with the reason.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

CODE, ENVIRONMENT, UNKNOWN = "code", "environment", "unknown"
# Files that do not change what the training computes (their software changes are seen in the
# software difference): locks, docs, workflows.
NOT_TRAINING = ("uv.lock", "poetry.lock", "requirements*.txt", "Pipfile.lock", "pylock.toml",
                "conda-lock.yml", "pixi.lock", "*.md", "*.rst", "docs/*", ".github/*",
                "LICENSE*", ".gitignore")
SOFTWARE_FIELDS_NOT_COMPARED = ("commit",)  # the code's identity: attribution's business


def software_diff(golden: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """`[{field, golden, run}]` for each software field that differs (not the commit)."""
    fields = [f for f in {**golden, **run} if f not in SOFTWARE_FIELDS_NOT_COMPARED]
    return [{"field": f, "golden": golden.get(f), "run": run.get(f)}
            for f in fields if golden.get(f) != run.get(f)]


def training_files(changed: list[str], folders: list[str]) -> list[str]:
    """The changed files that may change what the training computes (`folders`: the golden
    files' and the gate's output, whose files are not the training's)."""
    prefixes = tuple(folder.rstrip("/") + "/" for folder in folders)
    return [path for path in changed if not path.startswith(prefixes)
            and not any(fnmatchcase(path, p) or fnmatchcase(path.rsplit("/", 1)[-1], p)
                        for p in NOT_TRAINING)]


def attribute(diff: list[dict[str, Any]], changed: list[str] | None, folders: list[str],
              commit: str | None) -> dict[str, str]:
    """`{kind, reason}` of a change of the numerics."""
    fields = ", ".join(entry["field"] for entry in diff)
    if not diff:
        return {"kind": CODE, "reason": "the software is the golden file's: the code changed"
                                        " the numerics"}
    if changed is None:
        return {"kind": UNKNOWN,
                "reason": f"the software changed ({fields}) and the golden file's commit"
                          f" {(commit or 'unknown')[:12]} is not in this clone, so the code's"
                          " changes are not known (fetch the history: fetch-depth: 0)"}
    code = training_files(changed, folders)
    if not code:
        return {"kind": ENVIRONMENT,
                "reason": f"the software changed ({fields}) and no file the training runs"
                          " changed since the golden file's commit"}
    shown = ", ".join(code[:3]) + (f" and {len(code) - 3} more" if len(code) > 3 else "")
    return {"kind": UNKNOWN,
            "reason": f"both the software ({fields}) and the code ({shown}) changed since the"
                      " golden file's commit; the code was not run in the golden file's"
                      " software"}


def both_changed(diff: list[dict[str, Any]], changed: list[str] | None,
                 folders: list[str]) -> bool:
    """Both the software and the code changed since the golden file's commit: run G decides."""
    return bool(diff) and changed is not None and bool(training_files(changed, folders))


def by_rebuild(reproduced: bool) -> dict[str, str]:
    """What run G (the code in the golden file's rebuilt software) says."""
    if reproduced:
        return {"kind": ENVIRONMENT,
                "reason": "the pull request's code in the golden file's software reproduces the"
                          " golden trajectory: the software change did it"}
    return {"kind": CODE,
            "reason": "the pull request's code in the golden file's software does not reproduce"
                      " the golden trajectory: the code changed the numerics"}


def not_rebuilt(found: dict[str, str], why: str) -> dict[str, str]:
    """Both changed and run G could not run: `unknown`, with why."""
    head = found["reason"].split("; ")[0]
    return {"kind": UNKNOWN, "reason": f"{head}; {why}"}
