"""Environments built inside the user's training image, cached in Docker volumes (Docker mode).

An environment built in the gate's own container (the action's) never reaches the training,
which runs in a sibling container of the user's image: so the environment is built *from that
image*, in a sibling container, into a named volume that the training container then mounts
read-only at the same path (`ENV_ROOT`; launch/docker.py mounts `PythonEnvironment.volume`).

One volume per key, `repro-gate-env-<24 hex of sha256(image ID, pins, sources, inherit flag)>`: the
image's ID is the digest of its content, so another image (another Python, other inherited
packages) gets other volumes, and the same image on the next run reuses them. The build
container runs, with the image's own `python` (the interpreter the training finds), the same
steps as LocalEnvironments: `uv venv [--system-site-packages] --python <that python>`, then
`uv pip install --no-deps` of the pins from their sources (package_sources.py; files with
index passwords only in the container's tmpfs, local source folders mounted), then the
consistency check (`uv pip check`; with inherit_site_packages what the environment's
interpreter sees, judged here by interpreter.unmet). uv is this host's binary (it needs glibc
only), mounted read-only.

The marker (virtualenvs.py's `env.json`) is written last, by a second short container, once
the check is judged here. Concurrency: every container that builds or seals a volume first
takes `flock` on a lock file inside it (the volume is one directory on the daemon's host, so the
lock holds across containers and across gates). A builder that gets the lock after another finds
that one's marker, or its finished build (`BUILT_FILE`, with the check's output, written after
the check), and builds nothing; only a volume with neither is cleared and built. The seal writes
the marker only while a finished build of the same key is there, through create-then-rename: a
reader (who reads without the lock, from a container that is created but never started) sees no
marker or a whole one. A build that died half-way left neither file, and is built again.

Failures: pins that do not resolve are LOCK_UNRESOLVABLE and recorded in the marker, so asking
again reads the answer from the volume; an install that fails is ENVIRONMENT and remembered by
this object only (it may be the network: the next gate tries again). The daemon failing is
DOCKER: not a property of the pins, so the culprit search does not take it for a "skip".
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from pathlib import Path, PurePosixPath
from typing import Any

import docker
import docker.errors
import docker.types
import requests.exceptions

from repro_gate.config import Config
from repro_gate.credentials import without_credentials
from repro_gate.environments.docker_build import BUILD_SCRIPT, BuildAnswer, build_request
from repro_gate.environments.installer import failure_line, tool_error, uv_binary
from repro_gate.environments.interpreter import (
    FACTS_SCRIPT,
    Distribution,
    Interpreter,
    already_met,
    unmet,
)
from repro_gate.environments.package_sources import InstallGroup, PackageSources, option_lines
from repro_gate.environments.virtualenvs import (
    ENV_MARKER,
    INHERIT_PTH,
    PINS_FILE,
    Environment,
    _Marker,
    pins_sha256,
)
from repro_gate.errors import ErrorKind, GateError, one_line
from repro_gate.fingerprint.lockfiles import canonical_name
from repro_gate.launch import cancel, docker_image
from repro_gate.launch.docker import LABEL_GATE, LABEL_RUN, connect
from repro_gate.launch.host_paths import PathTranslator

ENV_ROOT = PurePosixPath("/opt/repro-gate/env")  # the volume, in the build and in the training
UV_TARGET = PurePosixPath("/opt/repro-gate/tools/uv")
VOLUME_PREFIX = "repro-gate-env-"
VOLUME_KEY_LENGTH = 24
LOCK_FILE = ".repro-gate.lock"
BUILT_FILE = ".repro-gate-built.json"  # a build finished (not yet judged): the seal needs it
LABEL_ENVIRONMENT = "org.repro-gate.environment"  # on each volume: `docker volume prune --filter`
BUILD_RUN = "environment"  # the LABEL_RUN of the build containers
DEFAULT_BUILD_NETWORK = "bridge"  # Docker's default network
BUILD_SECONDS = 3600  # one build (a CUDA torch is gigabytes); a hung index must not hang the gate
SEAL_ATTEMPTS = 2  # a finished build gone before its seal (removed by hand) is built again
# Where packages come from: the user's index settings reach the build (not the gate's tokens).
INDEX_VARIABLES = ("UV_INDEX", "UV_DEFAULT_INDEX", "UV_EXTRA_INDEX_URL", "UV_FIND_LINKS",
                   "UV_NO_INDEX", "UV_OFFLINE", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL",
                   "PIP_FIND_LINKS", "PIP_NO_INDEX")
FIND_LINKS_VARIABLES = ("UV_FIND_LINKS", "PIP_FIND_LINKS")  # a local directory is mounted
TOOL_VARIABLES = {"HOME": "/tmp", "UV_CACHE_DIR": "/tmp/uv-cache", "UV_LINK_MODE": "copy",
                  "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1", "NO_COLOR": "1",
                  "PIP_NO_INPUT": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


@dataclass(frozen=True)
class DockerEnvironments:
    """Environments in volumes built from the training image: a `BuildEnvironment`."""

    client: docker.DockerClient
    image_id: str  # the training image's ID (sha256 of its content): what the builds run
    translator: PathTranslator  # host paths for bind mounts (the gate may run in a container)
    staging_dir: Path  # a directory the Docker host sees: uv is copied there when it cannot
    gate: str  # labels the build containers, as the launcher labels its runs
    network: str = DEFAULT_BUILD_NETWORK
    inherit_site_packages: bool = False
    index_args: tuple[str, ...] = ()  # where packages come from: `--no-index --find-links DIR`
    read_only_paths: tuple[Path, ...] = ()  # mounted at the same path in builds (a local index)
    environ: Mapping[str, str] = field(default_factory=dict)  # passed to the builds
    sources: PackageSources = field(default_factory=PackageSources)  # the locks' origins
    _failures: dict[str, GateError] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def for_config(cls, config: Config, sources: PackageSources | None = None
                   ) -> DockerEnvironments:
        """Builds in `config.container.image`, by its digest, on `config.container.network`.

        Building needs a network that training does not: the build downloads the pinned
        packages from the index, while the training only runs what is then in the volume
        (read-only). So when the training's network is the isolated default `none`, the build
        uses Docker's default bridge; a network the user named (a proxy's) is used as it is.
        """
        settings = config.container
        if not settings.image:
            raise ValueError("Docker environments need an image")
        client = connect()
        image = docker_image.resolve(client, settings.image)
        assert image.id is not None  # an image the daemon resolved has its ID
        network = settings.network if settings.network != "none" else DEFAULT_BUILD_NETWORK
        upgrade = config.upgrade
        environ = without_credentials(os.environ)
        passed = {name: value for name, value in environ.items()
                  if name in settings.env_allow or name.startswith(INDEX_VARIABLES)}
        sources = sources or PackageSources()
        return cls(client, image.id, PathTranslator.for_this_process(client),
                   config.output_dir / "upgrade" / ".tools", config.name, network,
                   upgrade.inherit_site_packages,
                   read_only_paths=tuple(dict.fromkeys((*_local_links(passed),
                                                        *sources.local_folders()))),
                   environ=passed, sources=sources)

    def __call__(self, pins: Mapping[str, str]) -> Environment:
        """The environment of exactly `pins`, from its volume or built now."""
        pins = dict(sorted((canonical_name(name), version) for name, version in pins.items()))
        key = self._key(pins)
        volume = volume_name(key)
        if key in self._failures:
            known = self._failures[key]
            raise GateError(known.message, kind=known.kind)
        marker = self._read_marker(volume, key)
        reused = marker is not None
        if marker is None:
            marker = self._build(volume, key, pins)
        if marker.problems:
            more = f" (and {len(marker.problems) - 1} more)" if len(marker.problems) > 1 else ""
            raise GateError(f"the pins do not resolve: {marker.problems[0]}{more}",
                            kind=ErrorKind.LOCK_UNRESOLVABLE)
        return Environment(Path(str(ENV_ROOT / "bin" / "python")), pins_sha256(pins), pins,
                           reused, Path(str(ENV_ROOT)), tuple(marker.installed), volume)

    def _key(self, pins: Mapping[str, str]) -> str:
        installs = [group.masked_text() for group in self._groups(pins)]
        identity = {"image": self.image_id, "pins": pins, "inherit": self.inherit_site_packages,
                    "sources": installs}
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()

    def _build(self, volume: str, key: str, pins: dict[str, str]) -> _Marker:
        self._volume(volume, key)
        inherited = self._inherited(pins)
        install = {name: version for name, version in pins.items() if name not in inherited}
        request = build_request(key, self._groups(pins))
        for _ in range(SEAL_ATTEMPTS):
            built = self._script(volume, request)
            if built.marker is not None:
                return _marker(built.marker)  # another gate built it while this one waited
            if built.failed is not None:
                raise self._failed(volume, key, built)
            marker = _Marker(key, "uv", built.python, pins, sorted(install), inherited,
                             self._problems(built.check, pins))
            sealed = self._script(volume, {"mode": "seal", "key": key,
                                           "document": asdict(marker)})
            if sealed.marker is not None:
                return _marker(sealed.marker)
        raise GateError(f"cannot build the environment in volume {volume}: another build keeps"
                        " replacing it", kind=ErrorKind.ENVIRONMENT)

    def _groups(self, pins: Mapping[str, str]) -> list[InstallGroup]:
        """The installs of the pins the image does not meet, each from its own origin."""
        inherited = self._inherited(pins)
        install = {name: version for name, version in pins.items() if name not in inherited}
        return self.sources.groups(install, option_lines(self.index_args))

    def _failed(self, volume: str, key: str, answer: BuildAnswer) -> GateError:
        """The error of a build that failed, remembered; its volume goes (unless in use)."""
        what = {"create": "cannot create the environment",
                "install": "cannot install the pins"}.get(answer.failed or "", "cannot build")
        error = tool_error(answer.check, f"{what} in image {self.image_id[:19]}",
                           ErrorKind.ENVIRONMENT)
        self._failures[key] = error
        with contextlib.suppress(docker.errors.APIError):  # another build's: it clears it
            self.client.volumes.get(volume).remove()
        return error

    def _problems(self, check: subprocess.CompletedProcess[str],
                  pins: Mapping[str, str]) -> list[str]:
        """Why the installed set is inconsistent (empty: it is consistent), as virtualenvs.py
        judges it: `uv pip check`'s lines, or (inherit) the pins met where the run looks."""
        if check.returncode != 0 and not self.inherit_site_packages:
            problems = [line.strip() for line in check.stdout.splitlines()
                        if line.strip().startswith("The package")]
            return problems or [failure_line(check)]
        if check.returncode != 0:
            return [failure_line(check)]
        if self.inherit_site_packages:
            return unmet(_interpreter(check.stdout), pins)
        return []

    @cached_property
    def _base(self) -> Interpreter:
        """What the image's own `python` sees (for inherit_site_packages)."""
        answer = self._run(["python", "-c", FACTS_SCRIPT], [], "none")
        if answer.returncode != 0:
            raise GateError(f"cannot inspect the python of image {self.image_id[:19]}:"
                            f" {failure_line(answer)}", kind=ErrorKind.ENVIRONMENT)
        return _interpreter(answer.stdout)

    def _inherited(self, pins: Mapping[str, str]) -> dict[str, str]:
        """The pins the image's interpreter already meets: name -> its version."""
        return already_met(self._base, pins) if self.inherit_site_packages else {}

    def _script(self, volume: str, request: dict[str, Any]) -> BuildAnswer:
        """Run the build script in a sibling container on `volume` and read its answer."""
        spec = {**request, "root": str(ENV_ROOT), "uv": str(UV_TARGET), "lock": LOCK_FILE,
                "built": BUILT_FILE, "marker": ENV_MARKER, "pins_file": PINS_FILE,
                "pth": INHERIT_PTH, "inherit": self.inherit_site_packages,
                "facts": FACTS_SCRIPT}
        mounts = [docker.types.Mount(str(ENV_ROOT), volume, type="volume", no_copy=True)]
        network = "none"  # sealing writes a file: it needs neither uv, nor packages, nor a network
        if request["mode"] == "build":
            mounts += [self._uv_mount, *(self._bind(path) for path in self.read_only_paths)]
            network = self.network
        completed = self._run(["python", "-c", BUILD_SCRIPT, json.dumps(spec)], mounts, network)
        return BuildAnswer.parse(completed, f"the build in image {self.image_id[:19]}")

    def _run(self, argv: list[str], mounts: list[docker.types.Mount],
             network: str) -> subprocess.CompletedProcess[str]:
        """A sibling container of the image, to its end; removed even when cancelled."""
        name = f"repro-gate-env-build-{uuid.uuid4().hex[:12]}"
        environment = {**self.environ, **TOOL_VARIABLES}
        container = None
        try:
            # Root: the volume is root's; nothing else of the container's is writable.
            container = self.client.containers.create(
                self.image_id, argv, name=name, user="0:0", environment=environment,
                mounts=mounts, network_mode=network, read_only=True, working_dir="/tmp",
                tmpfs={"/tmp": "rw,exec,nosuid,nodev,mode=1777"}, cap_drop=["ALL"],
                security_opt=["no-new-privileges:true"],
                labels={LABEL_GATE: self.gate, LABEL_RUN: BUILD_RUN})
            container.start()
            exit_code = int(container.wait(timeout=BUILD_SECONDS).get("StatusCode", -1))
            stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
            stderr = container.logs(stdout=False, stderr=True).decode(errors="replace")
        except docker.errors.APIError as error:
            raise GateError(f"cannot build an environment in image {self.image_id[:19]}:"
                            f" {_explain(error)}", kind=ErrorKind.DOCKER) from None
        except requests.exceptions.RequestException:
            raise GateError(f"building an environment took over {BUILD_SECONDS} s",
                            kind=ErrorKind.ENVIRONMENT) from None
        finally:
            with cancel.deferred():
                _remove(container or _find(self.client, name))
        return subprocess.CompletedProcess(argv, exit_code, stdout, stderr)

    def _read_marker(self, volume: str, key: str) -> _Marker | None:
        """The volume's marker for `key`, read from a container that is never started."""
        try:
            self.client.volumes.get(volume)
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as error:
            raise GateError(f"cannot inspect volume {volume}: {_explain(error)}",
                            kind=ErrorKind.DOCKER) from None
        mount = docker.types.Mount(str(ENV_ROOT), volume, type="volume", read_only=True)
        container = None
        try:
            container = self.client.containers.create(
                self.image_id, ["python"], mounts=[mount], network_mode="none",
                labels={LABEL_GATE: self.gate, LABEL_RUN: BUILD_RUN})
            chunks, _ = container.get_archive(str(ENV_ROOT / ENV_MARKER))
            text = _single_file(b"".join(chunks))
        except docker.errors.NotFound:
            return None
        except docker.errors.APIError as error:
            raise GateError(f"cannot read volume {volume}: {_explain(error)}",
                            kind=ErrorKind.DOCKER) from None
        finally:
            with cancel.deferred():
                _remove(container)
        try:
            marker = _marker(json.loads(text))
        except (ValueError, TypeError):
            return None  # damaged: built again
        return marker if marker.key == key else None

    def _volume(self, volume: str, key: str) -> None:
        """Create the volume (an existing one is returned as it is)."""
        try:
            self.client.volumes.create(volume, labels={LABEL_ENVIRONMENT: key,
                                                       "org.repro-gate.image": self.image_id})
        except docker.errors.APIError as error:
            raise GateError(f"cannot create volume {volume}: {_explain(error)}",
                            kind=ErrorKind.DOCKER) from None

    @cached_property
    def _uv_mount(self) -> docker.types.Mount:
        """This host's uv, read-only; copied where the Docker host sees it when it cannot."""
        found = uv_binary()
        if found is None:
            raise GateError("building environments needs uv: pip install uv",
                            kind=ErrorKind.ENVIRONMENT)
        if self.translator.host_path(found) is None:  # in the gate's own image (the action)
            copy = self.staging_dir / "uv"
            if not copy.exists() or copy.stat().st_size != found.stat().st_size:
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(found, copy)
            found = copy
        return self._bind(found, target=str(UV_TARGET))

    def _bind(self, path: Path, target: str | None = None) -> docker.types.Mount:
        source = self.translator.host_path(path)
        if source is None:
            raise GateError(f"{path} is not on a volume the Docker host can see",
                            kind=ErrorKind.DOCKER)
        return docker.types.Mount(target or str(path), source, type="bind", read_only=True)


def volume_name(key: str) -> str:
    """The volume of an environment's key."""
    return VOLUME_PREFIX + key[:VOLUME_KEY_LENGTH]


def _local_links(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """The local directories among the find-links settings: the build sees them where the
    gate does (a wheelhouse; URLs need nothing)."""
    entries = (entry for name in FIND_LINKS_VARIABLES
               for entry in environ.get(name, "").replace(",", " ").split())
    return tuple(Path(entry) for entry in entries if os.path.isabs(entry) and Path(entry).is_dir())


def _marker(document: dict[str, Any]) -> _Marker:
    return _Marker(**document)


def _interpreter(stdout: str) -> Interpreter:
    """interpreter.py's facts, printed by `FACTS_SCRIPT` in the container."""
    facts = json.loads(stdout.strip().splitlines()[-1])
    distributions = {name: Distribution(version, tuple(requires))
                     for name, (version, requires) in facts["distributions"].items()}
    return Interpreter(facts["executable"], facts["version"], tuple(facts["site"]),
                       facts["markers"], distributions)


def _single_file(archive: bytes) -> str:
    """The text of the one file in a tar archive (what `get_archive` returns)."""
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        member = tar.next()
        handle = tar.extractfile(member) if member is not None else None
        return handle.read().decode() if handle is not None else ""


def _find(client: docker.DockerClient, name: str) -> Any:
    """The container called `name`, when a signal came before `create` returned it."""
    try:
        return client.containers.get(name)
    except (docker.errors.APIError, requests.exceptions.RequestException):
        return None


def _remove(container: Any) -> None:
    if container is None:
        return
    try:
        container.remove(force=True)
    except docker.errors.APIError as error:
        if not isinstance(error, docker.errors.NotFound) and "in progress" not in _explain(error):
            raise


def _explain(error: Exception) -> str:
    return one_line(getattr(error, "explanation", None) or error)
