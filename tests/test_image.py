"""The image a user deploys, built and run as deploy/base/deployment.yaml runs it (tests/image.py says how).

Built once per run with deploy/build-image.sh (about 40 s with the Debian base already in the engine's storage;
the first time a few minutes more, to make that base with mmdebstrap). Marked `slow`; skipped, with the reason,
where neither podman nor a running docker is here (.ci/run installs podman).
"""

from __future__ import annotations

import re
import shlex
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.image import (
    ConfigMapDir,
    Container,
    Image,
    Obj,
    Volumes,
    built_image,
    config_map_data,
    extender_spec,
    rendered,
    running,
)
from tests.paths import REPO

pytestmark = pytest.mark.slow

# The image is Debian (or python slim) with Python 3.11 (about 225 MB on the Debian base) and rulesched's
# dependencies (about 250 MB, half of it the kubernetes client's generated models): a bound with room for a
# dependency's growth, that still fails when something large (a compiler, pip's cache, the wheels) stays in.
MAX_IMAGE_BYTES = 600 * 1024 * 1024
DEFAULT_GRACE_SECONDS = 30  # Kubernetes' terminationGracePeriodSeconds where a pod spec names none
RELOAD_TIMEOUT = 30.0
RULES_CONFIGMAP = "rulesched-rules"
README = (REPO / "README.md").read_text()


@pytest.fixture(scope="module")
def image() -> Image:
    return built_image()


@pytest.fixture(scope="module")
def deployed() -> list[Obj]:
    return rendered(REPO / "deploy")


def rules_volume(objects: list[Obj], root: Path) -> tuple[ConfigMapDir, Volumes]:
    rules = ConfigMapDir(root / "rules", config_map_data(objects, RULES_CONFIGMAP))
    return rules, Volumes(config_maps={RULES_CONFIGMAP: rules.root}, secrets={}, scratch=root)


@pytest.fixture(scope="module")
def server(image: Image, deployed: list[Obj], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    """One container of the default install, for the tests that change nothing in it."""
    _, volumes = rules_volume(deployed, tmp_path_factory.mktemp("image"))
    with running(image, extender_spec(deployed), volumes) as container:
        yield container


def port(spec: Obj) -> int:
    [container] = spec["containers"]
    number: int = container["ports"][0]["containerPort"]
    return number


def test_image_size_is_bounded(image: Image) -> None:
    print(f"image {image.tag}: {image.size / 2**20:.0f} MiB")
    assert image.size < MAX_IMAGE_BYTES


def test_container_runs_as_the_deployments_user_with_no_capabilities(server: Container, deployed: list[Obj]) -> None:
    context = extender_spec(deployed)["containers"][0]["securityContext"]
    status = server.exec(["cat", "/proc/1/status"]).stdout
    fields = dict(line.split(":", 1) for line in status.splitlines())
    assert fields["Uid"].split() == [str(context["runAsUser"])] * 4
    assert fields["Gid"].split() == [str(context["runAsGroup"])] * 4
    assert int(fields["CapEff"], 16) == int(fields["CapPrm"], 16) == int(fields["CapBnd"], 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    assert server.exec(["cat", "/proc/1/cmdline"]).stdout.split("\0")[1] == "/opt/rulesched/bin/rulesched"


@pytest.mark.parametrize("path", ["/opt/rulesched/written", "/etc/rulesched/rules/written"])
def test_root_file_system_and_rules_are_read_only(server: Container, path: str) -> None:
    tried = server.exec(["python", "-c", f"open({path!r}, 'w')"])
    assert tried.returncode != 0
    assert "Read-only file system" in tried.stderr


def test_tmp_is_writable(server: Container) -> None:
    assert server.exec(["python", "-c", "open('/tmp/written', 'w').write('x')"]).returncode == 0


def test_container_answers_readyz(server: Container, deployed: list[Obj]) -> None:
    answer = httpx.get(server.url(port(extender_spec(deployed))) + "/readyz", timeout=10)
    assert answer.status_code == 200
    assert answer.json()["ready"] is True


def readme_calls() -> list[tuple[str, str, bytes]]:
    """Each README curl example as (path, body, the answer shown, as bytes)."""
    examples = re.findall(r"<!-- curl-example -->\n```sh\n(.*?)\n```", README, re.DOTALL)
    answers = re.findall(r"<!-- curl-answer -->\n```json\n(.*?)\n```", README, re.DOTALL)
    calls = []
    for example, answer in zip(examples, answers, strict=True):
        words = shlex.split(example)
        url = next(w for w in words if w.startswith("http://127.0.0.1:8888/"))
        calls.append((url.removeprefix("http://127.0.0.1:8888"), words[words.index("-d") + 1], answer.encode()))
    return calls


@pytest.mark.parametrize(("path", "body", "shown"), readme_calls(), ids=lambda v: v if isinstance(v, str) else "")
def test_readme_calls_answer_byte_exact(
    server: Container, deployed: list[Obj], path: str, body: str, shown: bytes
) -> None:
    headers = {"Content-Type": "application/json"}
    answer = httpx.post(server.url(port(extender_spec(deployed))) + path, content=body, headers=headers, timeout=10)
    assert answer.content == shown


def filter_reason(url: str) -> str:
    path, body, _ = readme_calls()[0]
    answer = httpx.post(url + path, content=body, timeout=10).json()
    reason: str = answer["FailedAndUnresolvableNodes"]["k8s-master"]
    return reason


def test_container_reloads_when_the_mounted_rules_change(image: Image, deployed: list[Obj], tmp_path: Path) -> None:
    rules, volumes = rules_volume(deployed, tmp_path)
    data = config_map_data(deployed, RULES_CONFIGMAP)
    changed = data["xy-least-cpu.yaml"].replace("missing label filter.xy.com", "needs label filter.xy.com")
    assert changed != data["xy-least-cpu.yaml"]
    spec = extender_spec(deployed)
    with running(image, spec, volumes) as container:
        url = container.url(port(spec))
        assert filter_reason(url).startswith("missing label")
        rules.update({**data, "xy-least-cpu.yaml": changed})  # the kubelet's `..data` swap
        deadline = time.monotonic() + RELOAD_TIMEOUT
        while not filter_reason(url).startswith("needs label"):
            assert time.monotonic() < deadline, container.logs()
            time.sleep(0.5)
        assert httpx.get(url + "/rules", timeout=10).json()["active"]["generation"] == 2


def test_sigterm_stops_the_container_within_the_grace_period(image: Image, deployed: list[Obj], tmp_path: Path) -> None:
    _, volumes = rules_volume(deployed, tmp_path)
    spec = extender_spec(deployed)
    grace = spec.get("terminationGracePeriodSeconds", DEFAULT_GRACE_SECONDS)
    with running(image, spec, volumes) as container:
        started = time.monotonic()
        # As the kubelet does: SIGTERM, then SIGKILL once the grace period is over (exit code 137).
        stopped = container.engine("stop", "--time", str(grace), container.name, timeout=grace + 30)
        took = time.monotonic() - started
        assert stopped.returncode == 0, stopped.stderr
        print(f"stopped in {took:.1f} s of a {grace} s grace period")
        assert took < grace
        assert container.state("ExitCode") == "0", container.logs()
        assert "Finished server process" in container.logs()
