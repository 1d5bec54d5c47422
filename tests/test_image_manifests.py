"""The manifests and the image agree: what every rendered variant of deploy/ asks of the rulesched container, the
image built by deploy/build-image.sh has and accepts (tests/image.py builds and runs it; marked `slow`).

Each variant's args name only flags the image's `rulesched serve --help` knows, and only settings' environment
variables; its container port is the port it serves; the image's entrypoint and user are the ones the pod spec
relies on; each distinct pair of probes (plain HTTP, and the main-scheduler overlay's mutual TLS) is run inside a
container started from the manifest, with its volume mounts. The variants whose flags need a cluster (bind,
requeue, deschedule) have the default's probes and mounts, which a test here holds.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path

import pytest
import trustme

from tests.image import (
    ConfigMapDir,
    Image,
    Obj,
    Volumes,
    built_image,
    config_map_data,
    engine_output,
    extender_spec,
    rendered,
    running,
)
from tests.paths import REPO

pytestmark = pytest.mark.slow

DEPLOY = REPO / "deploy"
VARIANTS = [DEPLOY, *sorted(p for p in (DEPLOY / "overlays").iterdir() if p.is_dir())]
PROBED = [DEPLOY, DEPLOY / "overlays" / "main-scheduler"]  # one variant of each distinct pair of probes
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
TLS_SECRET = "rulesched-tls"
TLS_NAME = "rulesched.rulesched-system.svc"  # the name the main-scheduler overlay admits for its own probes


def name(directory: Path) -> str:
    return str(directory.relative_to(REPO))


@functools.cache
def extender(directory: Path) -> Obj:
    """The rulesched container of the variant in `directory`."""
    containers: list[Obj] = extender_spec(rendered(directory))["containers"]
    [container] = [c for c in containers if c["name"] == "rulesched"]
    return container


@pytest.fixture(scope="module")
def image() -> Image:
    return built_image()


@pytest.fixture(scope="module")
def serve_help(image: Image) -> str:
    return engine_output(image, "run", "--rm", image.tag, "serve", "--help")


def unknown_flags(args: Sequence[str], help_text: str) -> list[str]:
    """The flags of `args` that the help text does not name."""
    known = set(re.findall(r"--[a-z][a-z0-9-]*", help_text))
    return [a.partition("=")[0] for a in args if a.startswith("--") and a.partition("=")[0] not in known]


def test_unknown_flags_sees_a_misspelt_flag() -> None:
    shown = "usage: rulesched serve [--rules PATH] [--enable-bind | --no-enable-bind]"
    assert unknown_flags(["--rules=/r", "--enable-bind", "--enable-bnd", "--rule"], shown) == ["--enable-bnd", "--rule"]


@pytest.mark.parametrize("directory", VARIANTS, ids=name)
def test_the_image_knows_every_flag_and_variable_the_manifests_pass(serve_help: str, directory: Path) -> None:
    container = extender(directory)
    assert container["args"][0] == "serve"
    assert all(arg.startswith("--") for arg in container["args"][1:])  # `--name=value`, one word each
    assert unknown_flags(container["args"], serve_help) == []
    known = set(re.findall(r"env (RULESCHED_[A-Z0-9_]+)", serve_help))
    referenced = set(re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", " ".join(container["args"])))
    assert {e["name"] for e in container.get("env", [])} - referenced <= known  # the rest only fill in args
    assert referenced <= {e["name"] for e in container.get("env", [])}


@pytest.mark.parametrize("directory", VARIANTS, ids=name)
def test_the_image_has_the_entrypoint_and_user_the_pod_spec_relies_on(image: Image, directory: Path) -> None:
    config = json.loads(engine_output(image, "image", "inspect", "--format", "{{json .Config}}", image.tag))
    container, spec = extender(directory), extender_spec(rendered(directory))
    context = {**spec["securityContext"], **container["securityContext"]}
    assert "command" not in container
    assert config["Entrypoint"] == ["rulesched"]
    assert config["User"] == f"{context['runAsUser']}:{context['runAsGroup']}"


def probes(container: Obj) -> list[Obj]:
    return [container[kind] for kind in PROBES if kind in container]


def started_as(container: Obj) -> tuple[list[Obj], list[Obj]]:
    """What a variant's container must have for its run here to stand for it: its probes and its mounts."""
    return probes(container), container["volumeMounts"]


def test_every_variants_probes_and_mounts_are_among_those_run() -> None:
    run = [started_as(extender(directory)) for directory in PROBED]
    assert all(started_as(extender(directory)) in run for directory in VARIANTS)


def served_port(container: Obj) -> int:
    return int(next(a for a in container["args"] if a.startswith("--port=")).partition("=")[2])


@pytest.mark.parametrize("directory", VARIANTS, ids=name)
def test_the_container_port_is_the_port_served(directory: Path) -> None:
    container = extender(directory)
    assert [p["containerPort"] for p in container["ports"]] == [served_port(container)]


def tls_secret(folder: Path) -> Path:
    """The Secret rulesched-tls's files: a CA and a certificate for the overlay's own name, server and client."""
    authority = trustme.CA()
    issued = authority.issue_cert(TLS_NAME)
    folder.mkdir()
    authority.cert_pem.write_to_path(str(folder / "ca.crt"))
    issued.cert_chain_pems[0].write_to_path(str(folder / "tls.crt"))
    issued.private_key_pem.write_to_path(str(folder / "tls.key"))
    for file in folder.iterdir():
        file.chmod(0o444)  # the Secret's mode 0440 with the pod's fsGroup, on a machine with no such group
    return folder


@pytest.mark.parametrize("directory", PROBED, ids=name)
def test_every_probe_answers_in_the_running_container(image: Image, directory: Path, tmp_path: Path) -> None:
    objects = rendered(directory)
    rules = tmp_path / "rules"
    ConfigMapDir(rules, config_map_data(objects, "rulesched-rules"))
    volumes = Volumes({"rulesched-rules": rules}, {TLS_SECRET: tls_secret(tmp_path / "tls")}, tmp_path)
    container = extender(directory)
    with running(image, extender_spec(objects), volumes) as started:
        for probe in probes(container):
            assert "exec" in probe, "only exec probes are run here: the NetworkPolicy admits no kubelet"
            done = started.exec(probe["exec"]["command"])
            assert done.returncode == 0, done.stderr
