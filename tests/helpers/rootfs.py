"""Build small test images from this machine's own Python, without any registry.

The root filesystem holds the interpreter that runs the tests (its prefix copied to
/usr/local/python, stdlib only), the shared libraries it and the chosen packages need (found with
`ldd`), and optionally packages copied from the test environment's site-packages (torch...).
Images are tagged by a hash of everything copied, so a second session reuses them.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import docker
import docker.errors

IMAGE_PREFIX = "/usr/local/python"
PYTHON_VERSION = f"python{sys.version_info.major}.{sys.version_info.minor}"
LIB_DIR = "lib/x86_64-linux-gnu"
STDLIB_SKIP = {
    "site-packages",
    "test",
    "idlelib",
    "tkinter",
    "turtledemo",
    "ensurepip",
    "lib2to3",
    f"config-{sys.version_info.major}.{sys.version_info.minor}-x86_64-linux-gnu",
}
# Package directories/modules of the test environment that make up "python + torch".
TORCH_PACKAGES = [
    "torch",
    "functorch",
    "torchgen",
    "numpy",
    "numpy.libs",
    "safetensors",
    "sympy",
    "mpmath",
    "networkx",
    "jinja2",
    "markupsafe",
    "fsspec",
    "filelock",
    "typing_extensions.py",
    "setuptools",
    "_distutils_hack",
]
# Runs of `vary` move the clock with the image's own libfaketime (the Debian package faketime).
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
# What pip needs to install a project (the action image's base).
PIP_PACKAGES = ["pip", "setuptools", "_distutils_hack"]
SKIP_PARTS = {"include"}
SKIP_PATHS = {"torch/test", "torch/include"}
PASSWD = "root:x:0:0:root:/root:/bin/false\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
GROUP = "root:x:0:\nnogroup:x:65534:\n"
ENV_PATH = f"{IMAGE_PREFIX}/bin:/usr/local/bin:/usr/bin:/bin"
# This machine's trust store (it may hold the CA of an egress proxy), for pip in image builds.
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
SHELL = Path("/bin/dash")
# In every Debian image (python:3.12-slim too); wheels installed later (Rust, C++) need them.
BASE_LIBRARIES = [
    Path(f"/{LIB_DIR}/{name}")
    for name in (
        "libgcc_s.so.1", "libstdc++.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1",
        "libutil.so.1",
    )
]


def python_prefix() -> Path:
    """The prefix of the interpreter running the tests (the base of its venv)."""
    return Path(sys.base_prefix)


def site_packages() -> Path:
    """The test environment's site-packages."""
    return Path(sysconfig.get_paths()["purelib"])


def image_files(packages: Iterable[str]) -> Iterator[tuple[Path, str]]:
    """(path on this machine, path in the image) of every file to copy, without libraries."""
    prefix = python_prefix()
    real_python = (prefix / "bin" / PYTHON_VERSION).resolve()
    yield real_python, f"{IMAGE_PREFIX}/bin/{PYTHON_VERSION}"
    for lib in sorted((prefix / "lib").glob(f"lib{PYTHON_VERSION}*.so*")):
        yield lib, f"{IMAGE_PREFIX}/lib/{lib.name}"
    stdlib = prefix / "lib" / PYTHON_VERSION
    for path in _walk(stdlib, skip_top=STDLIB_SKIP):
        if path.name.startswith("_tkinter"):
            continue
        yield path, f"{IMAGE_PREFIX}/lib/{PYTHON_VERSION}/{path.relative_to(stdlib).as_posix()}"
    site = site_packages()
    target_site = f"{IMAGE_PREFIX}/lib/{PYTHON_VERSION}/site-packages"
    for name in packages:
        source = site / name
        entries = [source] if source.is_file() else list(_walk(source, skip_top=set()))
        entries += _dist_info_files(site, name)
        for path in entries:
            relative = path.relative_to(site).as_posix()
            if any(relative.startswith(skip + "/") for skip in SKIP_PATHS):
                continue
            yield path, f"{target_site}/{relative}"
    if CA_BUNDLE.is_file():
        yield CA_BUNDLE, str(CA_BUNDLE)
    yield SHELL.resolve(), "/bin/sh"  # `RUN` in a Dockerfile needs it (needs only libc)


def _walk(root: Path, skip_top: set[str]) -> Iterator[Path]:
    for directory, dirnames, filenames in os.walk(root):
        here = Path(directory)
        dirnames[:] = sorted(
            d for d in dirnames
            if d not in SKIP_PARTS and not (here == root and d in skip_top)
        )
        for filename in sorted(filenames):
            path = here / filename
            if path.is_file():
                yield path


def _dist_info_files(site: Path, name: str) -> list[Path]:
    stem = name.removesuffix(".py").replace("-", "_").lower()
    found = []
    for info in site.glob("*.dist-info"):
        if info.name.split("-")[0].lower() == stem:
            found += [p for p in info.rglob("*") if p.is_file()]
    return found


def shared_libraries(files: Iterable[Path]) -> set[Path]:
    """System libraries (and the dynamic loader) the ELF files among `files` need."""
    needed: set[Path] = {lib for lib in BASE_LIBRARIES if lib.exists()}
    elf = [f for f in files if f.suffix == ".so" or ".so." in f.name or f.name.startswith("python")]
    for chunk in _chunks([str(f) for f in elf], 200):
        result = subprocess.run(["ldd", *chunk], capture_output=True, text=True, check=False)
        for line in result.stdout.splitlines():
            parts = line.split()
            if "=>" in parts and len(parts) >= 3 and parts[2].startswith("/"):
                needed.add(Path(parts[2]))
            elif parts and parts[0].startswith("/") and "ld-linux" in parts[0]:
                needed.add(Path(parts[0]))
    # Libraries inside the copied prefix and packages come along with them.
    own = (python_prefix().resolve(), site_packages().resolve())
    by_name = {p.name: p for p in sorted(needed) if not p.resolve().is_relative_to(own[0])}
    return {p for p in by_name.values() if not p.resolve().is_relative_to(own[1])}


def _chunks(items: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def content_hash(files: list[tuple[Path, str]], libraries: set[Path]) -> str:
    """A hash of what goes into the image (names, sizes, times) and of this builder."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    for source, target in files:
        info = source.stat()
        digest.update(f"{target}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    for lib in sorted(libraries):
        digest.update(f"{lib}\0{lib.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def write_rootfs(tar_path: Path, files: list[tuple[Path, str]], libraries: set[Path]) -> None:
    """The root filesystem as an uncompressed tar, everything owned by root."""
    lib_targets = [LIB_DIR + "/x", "lib64/x", IMAGE_PREFIX.lstrip("/") + "/bin/x"]
    parents = sorted({str(parent) for _, target in files for parent in
                      Path(target.lstrip("/")).parents if str(parent) != "."} |
                     {str(parent) for target in lib_targets for parent in Path(target).parents
                      if str(parent) != "."})
    with tarfile.open(tar_path, "w") as tar:
        for directory in ("tmp", "etc", "root", "proc", "sys", "dev", "bin", "usr/local/bin"):
            _add_dir(tar, directory, 0o1777 if directory == "tmp" else 0o755)
        # Every folder has its own entry: an engine that creates a missing one itself may give
        # it another mode (a rootless engine made them 0600, closed to users other than root).
        for directory in parents:
            if directory not in ("tmp", "etc", "root", "proc", "sys", "dev", "bin"):
                _add_dir(tar, directory, 0o755)
        for source, target in files:
            _add_file(tar, source, target.lstrip("/"))
        for lib in sorted(libraries):
            target = "lib64/" + lib.name if "ld-linux" in lib.name else f"{LIB_DIR}/{lib.name}"
            _add_file(tar, lib.resolve(), target)
        for link in ("python", "python3"):
            _add_symlink(tar, f"{IMAGE_PREFIX.lstrip('/')}/bin/{link}", PYTHON_VERSION)
        _add_text(tar, "etc/passwd", PASSWD)
        _add_text(tar, "etc/group", GROUP)
        _add_text(tar, "etc/ld.so.conf", f"/{LIB_DIR}\n{IMAGE_PREFIX}/lib\n")


def _add_dir(tar: tarfile.TarFile, name: str, mode: int) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    info.mode = mode
    tar.addfile(info)


def _add_file(tar: tarfile.TarFile, source: Path, target: str) -> None:
    info = tar.gettarinfo(str(source), arcname=target)
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    info.mode = 0o755 if info.mode & 0o111 else 0o644
    with source.open("rb") as handle:
        tar.addfile(info, handle)


def _add_symlink(tar: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    tar.addfile(info)


def _add_text(tar: tarfile.TarFile, name: str, text: str) -> None:
    _add_bytes(tar, name, text.encode())


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def ld_cache(files: list[tuple[Path, str]], libraries: set[Path], scratch: Path) -> bytes:
    """The image's /etc/ld.so.cache, so libraries are found as on any distribution."""
    (scratch / "etc").mkdir(parents=True)
    (scratch / "etc/ld.so.conf").write_text(f"/{LIB_DIR}\n{IMAGE_PREFIX}/lib\n")
    python_libs = [s for s, t in files if t.startswith(f"{IMAGE_PREFIX}/lib/lib")]
    for target_dir, sources in (
        (scratch / LIB_DIR, sorted(libraries)),
        (scratch / IMAGE_PREFIX.lstrip("/") / "lib", python_libs),
    ):
        target_dir.mkdir(parents=True, exist_ok=True)
        for source in sources:
            if "ld-linux" not in source.name and ".so" in source.name:
                shutil.copy(source.resolve(), target_dir / source.name)
    subprocess.run(["ldconfig", "-r", str(scratch)], check=True, capture_output=True)
    return (scratch / "etc/ld.so.cache").read_bytes()


def build_image(client: docker.DockerClient, repository: str, packages: list[str],
                extra: tuple[Path, ...] = ()) -> str:
    """`repository:<content hash>`, imported now unless an image with that tag exists; the
    `extra` files of this machine (those it has) go in at their own paths."""
    files = list(image_files(packages)) + [(path, str(path)) for path in extra if path.is_file()]
    libraries = shared_libraries([source for source, _ in files])
    tag = f"{repository}:{content_hash(files, libraries)}"
    try:
        client.images.get(tag)
        return tag
    except docker.errors.ImageNotFound:
        pass
    with tempfile.TemporaryDirectory() as scratch:
        tar_path = Path(scratch) / "rootfs.tar"
        write_rootfs(tar_path, files, libraries)
        with tarfile.open(tar_path, "a") as tar:
            _add_bytes(tar, "etc/ld.so.cache", ld_cache(files, libraries, Path(scratch) / "ld"))
        changes = [
            f"ENV PATH={ENV_PATH}",
            "ENV LANG=C.UTF-8",
            f"ENV PIP_CERT={CA_BUNDLE} SSL_CERT_FILE={CA_BUNDLE}",
            'CMD ["python3"]',
        ]
        client.api.import_image_from_file(
            str(tar_path), repository=repository, tag=tag.rsplit(":", 1)[1], changes=changes
        )
    for stale in client.images.list(name=repository):
        if tag not in stale.tags:
            with contextlib.suppress(docker.errors.APIError):  # still the base of another image
                client.images.remove(stale.id, force=True)
    return tag
