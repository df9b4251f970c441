"""Why the numbers changed: the code, or the environment.

Same software as the golden file: the code. The software changed and no file the training runs
changed since the golden file's commit (only locks, docs, workflows, the golden files): the
environment. Both changed: the code run in the golden file's rebuilt software (run G,
`rebuild.py`) decides: equal to the golden trajectory, the environment; else the code. Where it
cannot be rebuilt, `unknown` with the reason. What the golden file read from the training itself
(where it seeds) is the code's, never the software's: a refactor that moves the seeding line
changes no software.
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
# Facts of the golden file's `software` read from the training itself (where and how it
# seeds): they move with its code, so they are compared as the code, never as software.
TRAINING_FACTS = ("seeding",)
# The code's identity and the training's own facts: attribution's business.
SOFTWARE_FIELDS_NOT_COMPARED = ("commit", *TRAINING_FACTS)


def software_diff(golden: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """`[{field, golden, run}]` for each software field that differs (not the commit, nor what
    was read from the training)."""
    fields = [f for f in {**golden, **run} if f not in SOFTWARE_FIELDS_NOT_COMPARED]
    return [{"field": f, "golden": golden.get(f), "run": run.get(f)}
            for f in fields if golden.get(f) != run.get(f)]


def training_facts_diff(golden: dict[str, Any], run: dict[str, Any]) -> list[dict[str, Any]]:
    """`[{field, golden, run}]` for each fact read from the training that differs: part of the
    code's change."""
    return [{"field": f, "golden": golden.get(f), "run": run.get(f)}
            for f in TRAINING_FACTS if golden.get(f) != run.get(f)]


def training_files(changed: list[str], folders: list[str]) -> list[str]:
    """The changed files that may change what the training computes (`folders`: the golden
    files' and the gate's output, whose files are not the training's)."""
    prefixes = tuple(folder.rstrip("/") + "/" for folder in folders)
    return [path for path in changed if not path.startswith(prefixes)
            and not any(fnmatchcase(path, p) or fnmatchcase(path.rsplit("/", 1)[-1], p)
                        for p in NOT_TRAINING)]


def attribute(diff: list[dict[str, Any]], changed: list[str] | None, folders: list[str],
              commit: str | None, facts: list[dict[str, Any]] | None = None) -> dict[str, str]:
    """`{kind, reason}` of a change of the numerics (`facts`: the training's own facts that
    differ, `training_facts_diff`)."""
    fields = ", ".join(entry["field"] for entry in diff)
    if not diff:
        moved = "".join(f" ({entry['field']}: {entry['golden']} in the golden file,"
                        f" {entry['run']} now)" for entry in facts or [])
        return {"kind": CODE, "reason": "the software is the golden file's: the code changed"
                                        f" the numerics{moved}"}
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
