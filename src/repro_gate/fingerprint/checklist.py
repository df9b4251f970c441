"""The reproducibility checklist: one pass / warn / fail item per practice, with a one-line fix.

`static=True` (doctor) evaluates what can be known without a run; items that need one are
`deferred` and say so. Once runs A and B agreed bitwise, a failed item about randomness or
kernels inside the run (`CONTRADICTED_BY_AGREEMENT`) is `risk`: the runs showed it changed
nothing here, and it is advice for another machine or data, never a `fail` beside a PASS
(`weighed`). Items about the environment stay: two runs on one machine say nothing of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from repro_gate.config import Config
from repro_gate.fingerprint import seeding
from repro_gate.fingerprint.assemble import deterministic_runs

DEFERRED = "checked during `repro-gate check`"
# Failures that would make runs A and B differ on this machine, if they mattered here.
CONTRADICTED_BY_AGREEMENT = ("seeds", "deterministic_algorithms", "cudnn_benchmark",
                             "cublas_workspace", "dataloader_workers")
RISK_NOTE = ("runs A and B agreed, so it changed nothing here; it may on other hardware or"
             " data")
STATUSES = ("pass", "warn", "fail", "risk", "deferred")
GOOD_CUBLAS_CONFIGS = (":4096:8", ":16:8")


@dataclass
class Item:
    """One checklist line."""

    id: str
    category: str
    title: str
    status: str  # pass | warn | fail | risk | deferred
    detail: str
    fix: str | None = None


def evaluate(
    fingerprint: dict[str, Any],
    config: Config,
    in_process: dict[str, dict[str, Any] | None] | None,
    *,
    static: bool = False,
) -> dict[str, Any]:
    """The `checklist` section: items in a fixed order and the count of each status."""
    runs = deterministic_runs(in_process or {})
    env = fingerprint.get("env") or {}
    items = [
        image_pinned(env.get("image") or {}),
        lockfile_present(env.get("lockfiles") or []),
        packages_match_lock(env, static=static, in_image=bool(config.container.image)),
        clean_tree(fingerprint.get("code") or {}),
        data_checksummed(fingerprint.get("data") or {}),
        seeds_set(config, runs, (fingerprint.get("random") or {}).get("seeding"), static=static),
        deterministic_algorithms(runs, static=static),
        cudnn_benchmark_off(runs, static=static),
        cublas_workspace(config, runs, fingerprint, static=static),
        dataloader_workers_seeded(fingerprint, runs, static=static),
        tf32_recorded(runs, static=static),
        gpus_same_model(fingerprint.get("hardware") or {}),
    ]
    return _section(items)


def weighed(checklist: dict[str, Any], runs_agreed: bool) -> dict[str, Any]:
    """The section with the failures that runs A and B contradicted turned into `risk`."""
    if not runs_agreed:
        return checklist
    items = [Item(**item) for item in checklist["items"]]
    for item in items:
        if item.status == "fail" and item.id in CONTRADICTED_BY_AGREEMENT:
            item.status, item.detail = "risk", f"{item.detail} ({RISK_NOTE})"
    return _section(items)


def _section(items: list[Item]) -> dict[str, Any]:
    counts = {status: 0 for status in STATUSES}
    for item in items:
        counts[item.status] += 1
    return {"items": [asdict(item) for item in items], "counts": counts}


def image_pinned(image: dict[str, Any]) -> Item:
    title = "image pinned by digest"
    reference = image.get("reference")
    if not reference:
        return Item("image_pinned", "env", title, "warn",
                    "local run: the environment is this machine's, not a pinned image",
                    "run in a container: set `image: name@sha256:<digest>` in .repro-gate.yml")
    if "@sha256:" in reference:
        return Item("image_pinned", "env", title, "pass", f"{reference}")
    digests = image.get("repo_digests") or []
    suggestion = f"`image: {digests[0]}`" if digests else "`image: name@sha256:<digest>`"
    return Item("image_pinned", "env", title, "fail",
                f"{reference} is a tag: it can point at another image tomorrow",
                f"pin it by digest: {suggestion}")


def lockfile_present(lockfiles: list[dict[str, Any]]) -> Item:
    title = "lockfile present and hash-pinned"
    fix_generate = ("generate a lock with artifact hashes: `uv lock`, `poetry lock` or "
                    "`pip-compile --generate-hashes`")
    locks = [lf for lf in lockfiles if lf.get("is_lock") and not lf.get("error")]
    if not locks:
        if any(lf["format"] == "environment.yml" for lf in lockfiles):
            detail = "only environment.yml, which is not a lock (it is solved again on install)"
            return Item("lockfile", "env", title, "fail", detail,
                        "lock it: `conda-lock -f environment.yml` or `pixi lock`")
        loose = [lf for lf in lockfiles if lf["format"] == "requirements"]
        if loose:
            names = ", ".join(loose[0].get("unpinned", [])[:5])
            detail = f"{loose[0]['path']} does not pin every requirement ({names})"
            return Item("lockfile", "env", title, "fail", detail, fix_generate)
        broken = [lf for lf in lockfiles if lf.get("error")]
        if broken:
            return Item("lockfile", "env", title, "warn",
                        f"{broken[0]['path']}: {broken[0]['error']}", "regenerate the lockfile")
        return Item("lockfile", "env", title, "fail", "no lockfile found", fix_generate)
    hashed = [lf for lf in locks if lf.get("hash_pinned")]
    if hashed:
        names = ", ".join(lf["path"] for lf in hashed)
        return Item("lockfile", "env", title, "pass", f"{names} (every pin has an artifact hash)")
    return Item("lockfile", "env", title, "warn",
                f"{locks[0]['path']} pins versions but not artifact hashes", fix_generate)


def packages_match_lock(env: dict[str, Any], *, static: bool, in_image: bool) -> Item:
    title = "installed packages match the lock"
    if static and in_image:
        return Item("packages_match_lock", "env", title, "deferred",
                    f"the packages are inside the image: {DEFERRED}")
    locks = [lf for lf in env.get("lockfiles") or [] if lf.get("is_lock") and lf.get("pins")]
    if not locks:
        return Item("packages_match_lock", "env", title, "warn", "no lockfile pins to compare with",
                    "add a lockfile (see the lockfile item)")
    if not env.get("packages"):
        return Item("packages_match_lock", "env", title, "warn",
                    "the installed packages are unknown (no in-process fingerprint)",
                    "check that the training runs under the probe (see the run log)")
    mismatches = env.get("lock_mismatches") or []
    if mismatches:
        shown = ", ".join(
            f"{m['name']} {m['installed']} (locked {' | '.join(m['locked'])} in {m['lockfile']})"
            for m in mismatches[:3]
        )
        more = f" and {len(mismatches) - 3} more" if len(mismatches) > 3 else ""
        return Item("packages_match_lock", "env", title, "fail",
                    f"{len(mismatches)} installed differ from the lock: {shown}{more}",
                    "install from the lock: `uv sync --frozen`, `poetry install --sync` or "
                    "`pip install --require-hashes -r requirements.txt`")
    pinned = sum(len(lf["pins"]) for lf in locks)
    where = "in this interpreter" if static else "in the training's interpreter"
    return Item("packages_match_lock", "env", title, "pass",
                f"{pinned} pins checked against the packages installed {where}")


def clean_tree(code: dict[str, Any]) -> Item:
    title = "clean working tree"
    if code.get("commit") is None:
        return Item("clean_tree", "code", title, "warn",
                    f"code is not identified: {code.get('reason', 'no git commit')}",
                    "keep the training code in a git repository with at least one commit")
    if code.get("dirty"):
        untracked = code.get("untracked_files") or 0
        extra = f", {untracked} untracked files" if untracked else ""
        return Item("clean_tree", "code", title, "warn",
                    f"uncommitted changes on {code['commit'][:12]}{extra}",
                    "commit the changes so the commit identifies the code that ran")
    return Item("clean_tree", "code", title, "pass", f"commit {code['commit'][:12]}, clean")


def data_checksummed(data: dict[str, Any]) -> Item:
    title = "data checksummed"
    paths = data.get("paths") or []
    if not paths:
        return Item("data", "data", title, "warn", "no data paths configured",
                    "list the dataset files or directories under `data:` in .repro-gate.yml")
    missing = [e["path"] for e in paths if e.get("error")]
    if missing:
        errors = "; ".join(f"{e['path']} {e['error']}" for e in paths if e.get("error"))
        return Item("data", "data", title, "fail", errors,
                    "fix the `data:` paths in .repro-gate.yml (relative to the working directory)")
    if not data.get("hashed", True):
        return Item("data", "data", title, "pass",
                    f"{len(paths)} data paths exist; hashed during `repro-gate check` "
                    "(or `doctor --hash-data`)")
    return Item("data", "data", title, "pass",
                f"{data.get('files', 0)} files, {data.get('bytes', 0)} bytes, sha256 recorded")


def seeds_set(config: Config, runs: dict[str, dict[str, Any]], record: Any, *,
              static: bool) -> Item:
    """Seeding is the training's job: pass when it seeds torch before its first parameter (or
    the gate was asked to seed, which the detail says); warn on what stays unseeded."""
    title = "seeds set"
    if config.seed is not None:
        return Item("seeds", "random", title, "pass",
                    f"seeded by the gate (seed {config.seed}): the `to reproduce outside the"
                    " gate` lines of the report seed it the same way")
    if static:
        return Item("seeds", "random", title, "deferred",
                    f"{DEFERRED}: the gate seeds nothing, the training must seed itself")
    if not runs or not isinstance(record, dict) or record.get("note"):
        return _no_runs("seeds", title)
    anchor = seeding.unseeded_anchor(record)
    if anchor is not None:
        return Item("seeds", "random", title, "warn", _unseeded_detail(record, anchor),
                    f"add `torch.manual_seed(0)` {_before(anchor)}")
    calls = record.get("training") or []
    sites = sorted({f"{c.get('generator')} at {c.get('file')}:{c.get('line')}" for c in calls})
    detail = "the training seeds " + ", ".join(sites[:4]) + (" …" if len(sites) > 4 else "")
    others = [g for g in record.get("unseeded") or [] if g != "torch"]
    if others:  # numpy is imported by torch itself: unseeded, it may well be unused
        detail += f"; never seeded: {', '.join(others)} (seed them too if the training uses them)"
    return Item("seeds", "random", title, "pass", detail)


def _unseeded_detail(record: dict[str, Any], anchor: dict[str, Any]) -> str:
    if anchor.get("seeded_late"):
        return "torch is seeded only after the first parameter was created"
    return f"never seeded: {', '.join(record.get('unseeded') or [])}"


def _before(anchor: dict[str, Any]) -> str:
    where = f"{anchor['file']}:{anchor['line']}" if anchor.get("line") else anchor.get("file")
    return f"before {where}, where the first parameter is created" if where else \
        "before the model is built"


def deterministic_algorithms(runs: dict[str, dict[str, Any]], *, static: bool) -> Item:
    title = "deterministic algorithms on"
    flags = _flags(runs, static, "deterministic_algorithms", title)
    if isinstance(flags, Item):
        return flags
    off = [name for name, f in flags.items() if not f.get("deterministic_algorithms")]
    if off:
        return Item("deterministic_algorithms", "random", title, "fail",
                    f"off at the end of run {', '.join(off)}",
                    "remove the call that turns it off: torch.use_deterministic_algorithms(False)")
    warn_only = any(f.get("warn_only") for f in flags.values())
    mode = "warn-only (ops without a deterministic kernel are reported)" if warn_only else "strict"
    # The state the training left at exit: one that switched it off and on again passes.
    return Item("deterministic_algorithms", "random", title, "pass",
                f"on when the training exited, {mode}")


def cudnn_benchmark_off(runs: dict[str, dict[str, Any]], *, static: bool) -> Item:
    title = "cuDNN benchmark off"
    flags = _flags(runs, static, "cudnn_benchmark", title)
    if isinstance(flags, Item):
        return flags
    on = [name for name, f in flags.items() if f.get("cudnn_benchmark")]
    if on:
        return Item("cudnn_benchmark", "random", title, "fail",
                    f"torch.backends.cudnn.benchmark is True in run {', '.join(on)}",
                    "set torch.backends.cudnn.benchmark = False (it picks kernels by timing)")
    return Item("cudnn_benchmark", "random", title, "pass", "off when the training exited")


def cublas_workspace(config: Config, runs: dict[str, dict[str, Any]],
                     fingerprint: dict[str, Any], *, static: bool) -> Item:
    title = "cuBLAS workspace configured"
    fix = "set CUBLAS_WORKSPACE_CONFIG=:4096:8 (or :16:8)"
    configured = config.env.get("CUBLAS_WORKSPACE_CONFIG")
    if configured is not None and configured not in GOOD_CUBLAS_CONFIGS:
        return Item("cublas_workspace", "random", title, "fail",
                    f"`env` sets CUBLAS_WORKSPACE_CONFIG={configured}", fix + " in `env:`")
    if static:
        return Item("cublas_workspace", "random", title, "deferred",
                    f"the gate sets :4096:8 for every run; {DEFERRED}")
    flags = _flags(runs, static, "cublas_workspace_config", title)
    if isinstance(flags, Item):
        return flags
    values = {name: f.get("cublas_workspace_config") for name, f in flags.items()}
    bad = {name: v for name, v in values.items() if v not in GOOD_CUBLAS_CONFIGS}
    if not bad:
        return Item("cublas_workspace", "random", title, "pass",
                    f"CUBLAS_WORKSPACE_CONFIG={next(iter(values.values()))}")
    uses_cuda = bool((fingerprint.get("hardware") or {}).get("gpus"))
    shown = ", ".join(f"{name}: {value or 'unset'}" for name, value in bad.items())
    return Item("cublas_workspace", "random", title, "fail" if uses_cuda else "warn",
                f"CUBLAS_WORKSPACE_CONFIG {shown}" + ("" if uses_cuda else " (matters on GPUs)"),
                fix)


def dataloader_workers_seeded(fingerprint: dict[str, Any], runs: dict[str, dict[str, Any]],
                              *, static: bool) -> Item:
    title = "DataLoader workers seeded"
    if static:
        return Item("dataloader_workers", "random", title, "deferred", DEFERRED)
    if not runs:
        return _no_runs("dataloader_workers", title)
    loaders = (fingerprint.get("in_process") or {}).get("dataloaders") or []
    unseeded = [d for d in loaders
                if d.get("num_workers", 0) > 0 and not d.get("generator")
                and not d.get("worker_init_fn")]
    if unseeded:
        where = ", ".join(f"{d.get('file')}:{d.get('line')}" for d in unseeded[:3])
        return Item("dataloader_workers", "random", title, "fail",
                    f"DataLoader with num_workers > 0 and neither generator nor worker_init_fn "
                    f"at {where}",
                    "pass generator=torch.Generator().manual_seed(seed) and a worker_init_fn "
                    "that seeds numpy and random")
    with_workers = sum(1 for d in loaders if d.get("num_workers", 0) > 0)
    detail = (f"{with_workers} DataLoaders with workers, all seeded" if with_workers
              else "no DataLoader with worker processes was constructed")
    return Item("dataloader_workers", "random", title, "pass", detail)


def tf32_recorded(runs: dict[str, dict[str, Any]], *, static: bool) -> Item:
    title = "TF32 state recorded"
    flags = _flags(runs, static, "float32_matmul_precision", title)
    if isinstance(flags, Item):
        return flags
    first = next(iter(flags.values()))
    detail = (f"float32 matmul precision {first.get('float32_matmul_precision')}, "
              f"TF32 matmul {first.get('cuda_matmul_allow_tf32')}, "
              f"TF32 cuDNN {first.get('cudnn_allow_tf32')}")
    return Item("tf32", "random", title, "pass", detail)


def gpus_same_model(hardware: dict[str, Any]) -> Item:
    title = "all GPUs the same model"
    gpus = hardware.get("gpus") or []
    if not gpus:
        return Item("gpus_same_model", "hardware", title, "pass",
                    f"no GPU ({hardware.get('gpu_reason', 'none found')})")
    models = sorted({f"{g.get('name')} ({g.get('mig_mode') or 'no MIG info'})" for g in gpus})
    if len({g.get("name") for g in gpus}) > 1:
        return Item("gpus_same_model", "hardware", title, "fail",
                    f"mixed GPUs: {', '.join(models)}",
                    "request GPUs of one model (`gpus:` device IDs or UUIDs of identical boards)")
    return Item("gpus_same_model", "hardware", title, "pass",
                f"{len(gpus)}x {gpus[0].get('name')}")


def _flags(runs: dict[str, dict[str, Any]], static: bool, key: str, title: str
           ) -> dict[str, dict[str, Any]] | Item:
    """Each deterministic run's flags, or the item to return when they cannot be judged."""
    item_id = {"deterministic_algorithms": "deterministic_algorithms",
               "cudnn_benchmark": "cudnn_benchmark",
               "cublas_workspace_config": "cublas_workspace",
               "float32_matmul_precision": "tf32"}[key]
    if static:
        return Item(item_id, "random", title, "deferred", DEFERRED)
    if not runs:
        return _no_runs(item_id, title)
    flags = {name: data.get("flags") or {} for name, data in runs.items()}
    if key != "cublas_workspace_config" and any(key not in f for f in flags.values()):
        return Item(item_id, "random", title, "warn",
                    "torch was not imported by the training, so its flags are unknown",
                    "nothing to do unless the training uses torch")
    return flags


def _no_runs(item_id: str, title: str) -> Item:
    return Item(item_id, "random", title, "warn", "no run left an in-process fingerprint",
                "check that the training runs under the probe (see the run log)")
