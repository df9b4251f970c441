# The image of the repro-gate GitHub action. It only orchestrates: the training runs in the
# user's own image, as a sibling container started through the runner's Docker socket.
#
# The base is pinned by digest (the multi-arch index of python:3.12-slim). Refresh it with
#   docker buildx imagetools inspect python:3.12-slim
# and substitute another base with --build-arg BASE_IMAGE=...
ARG BASE_IMAGE=python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea
FROM ${BASE_IMAGE}

# EXTRAS=torch adds torch, which comparing .pt checkpoints needs (about 700 MB more).
ARG EXTRAS=""

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

COPY pyproject.toml README.md LICENSE /opt/repro-gate/
COPY src /opt/repro-gate/src
RUN python -m pip install --no-cache-dir "/opt/repro-gate${EXTRAS:+[$EXTRAS]}"

# GitHub runs container actions as root with the workspace as working directory (no USER, no
# WORKDIR here); the training itself never runs as root.
ENTRYPOINT ["repro-gate", "action"]
