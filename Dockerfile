# The image of the repro-gate GitHub action. It only orchestrates: the training runs in the
# user's own image, as a sibling container started through the runner's Docker socket.
#
# The base is pinned by digest (the multi-arch index of python:3.12-slim), on a FROM line of
# its own so that Dependabot can update it (it reads no ARG in FROM: dependabot-core#2057).
# Refresh it with
#   docker buildx imagetools inspect python:3.12-slim
# To build on another base (a mirror), replace the image on this line, or with BuildKit:
#   docker buildx build --build-context python:3.12-slim@sha256:...=docker-image://MIRROR .
FROM python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea AS base

# Stage 1: repro-gate and its dependencies in a virtual environment. Only that environment
# reaches the image: not the sources, the build backend or pip's work files, test suites or
# type stubs (numpy's tests alone are 15 MB). Bytecode is compiled once, unchecked (a container
# never edits its sources): 10.5 MB that cut the start from 3.1 s to 1.3 s under load.
# docs/performance.md "The action image" has the measurements behind each choice.
FROM base AS build

# EXTRAS=torch adds torch (about 700 MB), only for checkpoint formats the torch-free reader
# cannot read; .pt and .safetensors are compared tensor by tensor without it.
ARG EXTRAS=""

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The base's pip installs into the environment (--python): the environment needs no pip of its
# own, and the base needs no ensurepip. Pruning uses Python, not find: a base may have no shell
# tools at all (the test suite's has only /bin/sh).
ARG COMPILE="python -m compileall -q -j 0 --invalidation-mode unchecked-hash"
ARG PRUNE="import pathlib, shutil; found = list(pathlib.Path('/opt/repro-gate/lib').rglob('*')); [shutil.rmtree(p, ignore_errors=True) for p in found if p.is_dir() and p.name in ('tests', '__pycache__')]; [p.unlink() for p in found if p.suffix == '.pyi' and p.exists()]"

# The dependencies first, from the metadata and a placeholder package, so that a change to
# the sources rebuilds only the last layer (seconds) instead of every dependency.
COPY pyproject.toml README.md LICENSE /src/repro-gate/
RUN python -m venv --without-pip /opt/repro-gate \
    && python -c "import pathlib; p = pathlib.Path('/src/repro-gate/src/repro_gate'); p.mkdir(parents=True); (p / '__init__.py').touch()" \
    && python -m pip --python /opt/repro-gate/bin/python install --no-compile \
        "/src/repro-gate${EXTRAS:+[$EXTRAS]}" \
    && python -c "$PRUNE" \
    && $COMPILE /opt/repro-gate/lib

COPY src /src/repro-gate/src
RUN python -m pip --python /opt/repro-gate/bin/python install --no-compile --no-deps \
        --force-reinstall /src/repro-gate \
    && $COMPILE /opt/repro-gate/lib/python*/site-packages/repro_gate

# Stage 2: the base and the environment, nothing else.
FROM base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/repro-gate/bin:$PATH

COPY --from=build /opt/repro-gate /opt/repro-gate

# GitHub runs container actions as root with the workspace as working directory (no USER, no
# WORKDIR here); the training itself never runs as root.
ENTRYPOINT ["repro-gate", "action"]
