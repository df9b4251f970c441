"""Start-up hook of the repro-gate probe.

This directory is put first on PYTHONPATH for the training command. This file first runs the
`sitecustomize` the environment had before (so the user's setup keeps working), then, only when
REPRO_GATE_RUN_DIR is set, installs the probe. It stays cheap: torch is never imported here.
"""

import os
import sys


def _run_next_sitecustomize() -> None:
    """Execute the next `sitecustomize` on sys.path after this directory, if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.realpath(__file__))
    later: list[str] = []
    for entry in sys.path:
        if os.path.realpath(entry or os.curdir) == here:
            later = []  # only what comes after this directory
        else:
            later.append(entry)
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", later)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


try:
    _run_next_sitecustomize()
except Exception as error:  # a broken user sitecustomize must look as it would without us
    print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{error!r}", file=sys.stderr)

if os.environ.get("REPRO_GATE_RUN_DIR"):
    try:
        import _repro_gate_probe

        _repro_gate_probe.install()
    except Exception as error:
        print(f"repro-gate probe: not installed: {error!r}", file=sys.stderr)
