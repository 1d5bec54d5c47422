"""The rulesched image for tests: built by deploy/build-image.sh, run as a rendered Deployment's container says.

`built_image` builds it once the way a user does (`deploy/build-image.sh --debian-base`: wheels made on this
machine, a Debian bookworm base made with mmdebstrap, no registry; without mmdebstrap, on the Dockerfile's
default base, from its registry) and skips with the script's own reason where neither podman nor a running docker
is here. `running` starts one container of a rendered pod spec: its
image's entrypoint with the container's args, its user, read-only root file system, dropped capabilities, each
volume mount (the rules ConfigMap laid out as the kubelet lays it out, emptyDirs as tmpfs, Secrets from files the
test gives), and each container port published on 127.0.0.1 only. The one departure from the manifest: no
cluster here, so `--cluster=on` becomes `--cluster=off` and the README's example snapshot, mounted read-only.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.paths import REPO
from tests.test_deploy import kubectl

BUILD_SCRIPT = REPO / "deploy" / "build-image.sh"
TAG = "localhost/rulesched:test"
SNAPSHOT_MOUNT = "/etc/rulesched/snapshot"
_BUILD_TIMEOUT = 900.0  # a first build makes the Debian base (mmdebstrap) and every wheel
_START_TIMEOUT = 60.0

Obj = dict[str, Any]


@dataclass(frozen=True)
class Image:
    engine: str  # podman or docker: the same command line for both
    tag: str
    size: int  # bytes, as the engine reports it


def engine_or_skip() -> str:
    """The engine the build script would use, or a skip with the script's reason."""
    found = subprocess.run([str(BUILD_SCRIPT), "--engine"], capture_output=True, text=True, timeout=60, check=False)
    if found.returncode != 0:
        pytest.skip(f"no container engine to build the image: {found.stderr.strip()}")
    return found.stdout.strip()


@functools.cache  # one build for every test module (a skip is not cached: it is raised again)
def built_image() -> Image:
    engine = engine_or_skip()
    base = ["--debian-base"] if shutil.which("mmdebstrap") else []
    before = image_id(engine)
    environment = {**os.environ, "PYTHON": sys.executable}  # the wheels made by the tests' own Python 3.11
    done = subprocess.run(
        [str(BUILD_SCRIPT), *base, TAG], env=environment, capture_output=True, text=True, timeout=_BUILD_TIMEOUT
    )
    assert done.returncode == 0, f"deploy/build-image.sh failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    print(done.stdout)  # the image, its id and its size, in the test's output
    if before not in ("", image_id(engine)):  # the last run's image, now untagged: its layers would pile up
        subprocess.run([engine, "image", "rm", before], capture_output=True, timeout=60, check=False)
    size = int(re.findall(r"^size: (\d+) bytes$", done.stdout, re.MULTILINE)[0])
    return Image(engine, TAG, size)


def image_id(engine: str) -> str:
    """The id of the image tagged TAG, or "" when there is none."""
    shown = subprocess.run(
        [engine, "image", "inspect", "--format", "{{.Id}}", TAG], capture_output=True, text=True, timeout=60
    )
    return shown.stdout.strip() if shown.returncode == 0 else ""


def rendered(directory: Path) -> list[Obj]:
    """The objects `kubectl apply -k directory` would create."""
    done = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [o for o in yaml.safe_load_all(done.stdout) if o]


def extender_spec(objects: Sequence[Obj]) -> Obj:
    """The pod spec of the Deployment rulesched."""
    [deployment] = [o for o in objects if o["kind"] == "Deployment" and o["metadata"]["name"] == "rulesched"]
    spec: Obj = deployment["spec"]["template"]["spec"]
    return spec


def config_map_data(objects: Sequence[Obj], name: str) -> dict[str, str]:
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == name]
    data: dict[str, str] = config_map["data"]
    return data


def engine_output(image: Image, *args: str) -> str:
    """What an engine command prints (`run --rm TAG ...`, `image inspect ...`), which must succeed."""
    done = subprocess.run([image.engine, *args], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def readme_snapshot_flags() -> list[str]:
    """The README run command's snapshot flags (--nodes, --metrics, ...), pointed at the read-only mount."""
    readme = (REPO / "README.md").read_text()
    command = re.findall(r"<!-- run-command -->\n```\w*\n(.*?)\n```", readme, re.DOTALL)[0]
    words = shlex.split(command.split("&&")[-1])
    pairs = zip(words[2::2], words[3::2], strict=True)
    return [f"{flag}={SNAPSHOT_MOUNT}/{Path(value).name}" for flag, value in pairs if flag != "--rules"]


def snapshot_dir() -> Path:
    """The directory of the README's snapshot files (all in one, examples/cluster/)."""
    [folder] = {Path(flag.partition("=")[2]).parent for flag in readme_snapshot_flags()}
    assert str(folder) == SNAPSHOT_MOUNT
    return REPO / "examples" / "cluster"


def without_cluster(args: Sequence[str]) -> list[str]:
    """The container's args with the cluster swapped for the README's snapshot (the one departure)."""
    assert "--cluster=on" in args, args
    return [*(a for a in args if a != "--cluster=on"), "--cluster=off", *readme_snapshot_flags()]


class ConfigMapDir:
    """A ConfigMap volume as the kubelet writes it: files in a timestamped folder, `..data` pointing at it, and
    a link per key through `..data`; an update writes a new folder and swaps `..data` in one rename."""

    def __init__(self, root: Path, data: Mapping[str, str]) -> None:
        self.root = root
        root.mkdir(mode=0o755)
        self.update(data)

    def update(self, data: Mapping[str, str]) -> None:
        folder = self.root / f"..{uuid.uuid4().hex}"
        folder.mkdir(mode=0o755)
        for name, text in data.items():
            (folder / name).write_text(text)
            (folder / name).chmod(0o644)
        (self.root / "..data_tmp").symlink_to(folder.name)
        (self.root / "..data_tmp").replace(self.root / "..data")
        for name in data:
            if not (self.root / name).is_symlink():
                (self.root / name).symlink_to(f"..data/{name}")


@dataclass(frozen=True)
class Volumes:
    """Where each of a pod spec's volumes comes from on this machine."""

    config_maps: Mapping[str, Path]  # ConfigMap name -> its ConfigMapDir
    secrets: Mapping[str, Path]  # Secret name -> a directory of its files (an optional one may be absent)
    scratch: Path  # where an absent optional Secret's empty directory is made


def mount_options(spec: Obj, container: Obj, volumes: Volumes) -> list[str]:
    """The engine's options for each of the container's volume mounts."""
    by_name = {v["name"]: v for v in spec["volumes"]}
    options = []
    for mount in container["volumeMounts"]:
        volume, target = by_name[mount["name"]], mount["mountPath"]
        suffix = ":ro" if mount.get("readOnly") else ""
        if "emptyDir" in volume:
            size = volume["emptyDir"].get("sizeLimit", "64Mi").replace("Mi", "m")
            options += ["--tmpfs", f"{target}:rw,size={size},mode=1777"]
        elif "configMap" in volume:
            options += ["--volume", f"{volumes.config_maps[volume['configMap']['name']]}:{target}{suffix}"]
        else:
            options += ["--volume", f"{secret_dir(volume['secret'], volumes)}:{target}{suffix}"]
    return options


def secret_dir(secret: Obj, volumes: Volumes) -> Path:
    if secret["secretName"] in volumes.secrets:
        return volumes.secrets[secret["secretName"]]
    assert secret.get("optional"), f"no files for the Secret {secret['secretName']}"
    empty = volumes.scratch / f"empty-{secret['secretName']}"
    empty.mkdir(mode=0o755, exist_ok=True)
    return empty


def security_options(spec: Obj, container: Obj) -> list[str]:
    """The pod's and the container's securityContext as engine options (the container's wins)."""
    context = {**spec.get("securityContext", {}), **container["securityContext"]}
    options = ["--user", f"{context['runAsUser']}:{context['runAsGroup']}"]
    if context.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    if context.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    options += [f"--cap-drop={cap}" for cap in context.get("capabilities", {}).get("drop", [])]
    return options


class Container:
    """A started container: the engine's name for it, and the host's 127.0.0.1 port for each container port."""

    def __init__(self, image: Image, name: str) -> None:
        self.image, self.name = image, name

    def engine(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([self.image.engine, *args], capture_output=True, text=True, timeout=timeout, check=False)

    def port(self, container_port: int) -> int:
        shown = self.engine("port", self.name, f"{container_port}/tcp").stdout.strip()
        host, _, port = shown.splitlines()[0].rpartition(":")
        assert host == "127.0.0.1", shown
        return int(port)

    def url(self, container_port: int) -> str:
        return f"http://127.0.0.1:{self.port(container_port)}"

    def exec(self, command: Sequence[str]) -> subprocess.CompletedProcess[str]:
        return self.engine("exec", self.name, *command)

    def logs(self) -> str:
        shown = self.engine("logs", self.name)
        return shown.stdout + shown.stderr

    def state(self, field: str) -> str:
        return self.engine("inspect", "--format", f"{{{{.State.{field}}}}}", self.name).stdout.strip()


@contextlib.contextmanager
def running(
    image: Image, spec: Obj, volumes: Volumes, name: str = "rulesched", namespace: str = "rulesched-system"
) -> Iterator[Container]:
    """Start the pod spec's container `name` (cluster swapped for the snapshot) as a pod in `namespace`;
    remove it afterwards."""
    [container] = [c for c in spec["containers"] if c["name"] == name]
    assert "command" not in container  # the image's entrypoint runs, as in the cluster
    ports = [f"--publish=127.0.0.1::{p['containerPort']}" for p in container.get("ports", [])]
    values = environment_values(container, namespace)
    environment = [f"--env={name}={value}" for name, value in values.items()]
    started = Container(image, f"rulesched-test-{uuid.uuid4().hex[:12]}")
    snapshot = ["--volume", f"{snapshot_dir()}:{SNAPSHOT_MOUNT}:ro"]
    options = [*security_options(spec, container), *mount_options(spec, container, volumes), *snapshot]
    run = started.engine(
        "run", "--detach", "--name", started.name, *options, *ports, *environment, image.tag,
        *without_cluster(expanded(container["args"], values)),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    try:
        wait_listening(started)
        yield started
    finally:
        started.engine("rm", "--force", started.name)


def environment_values(container: Obj, namespace: str) -> dict[str, str]:
    """The container's environment as the kubelet gives it: a value, or the pod's namespace from the downward
    API (the only field reference the manifests use; any other fails here, so a new one is noticed)."""
    values = {}
    for variable in container.get("env", []):
        if "value" in variable:
            values[variable["name"]] = variable["value"]
            continue
        assert variable["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}, variable
        values[variable["name"]] = namespace
    return values


def expanded(args: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """`$(NAME)` in the arguments replaced by the variable's value, as the kubelet does (`$$` escapes)."""

    def value(match: re.Match[str]) -> str:
        return "$" if match.group(0) == "$$" else values.get(match.group(1), match.group(0))

    return [re.sub(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)", value, a) for a in args]


def wait_listening(container: Container) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while "Uvicorn running on" not in container.logs():
        assert container.state("Running") == "true", f"the container stopped:\n{container.logs()}"
        assert time.monotonic() < deadline, f"the container did not start listening:\n{container.logs()}"
        time.sleep(0.2)
