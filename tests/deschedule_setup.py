"""The descheduler's tests' setting: the loopback API's nodes and pods, live caches, a rule set evicting from
node-d (labelled `filter.xy.com: "no"`), and an Auditor with its Descheduler, stepped by hand."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rulesched.cluster.kube.access import KubeAccess
from rulesched.cluster.pods.index import PodIndex
from rulesched.cluster.pods.placement_view import PlacementViews
from rulesched.cluster.pods.podcache import PodCache
from rulesched.controllers.audit.auditor import Auditor, AuditSources
from rulesched.controllers.audit.descheduler import DescheduleOptions, Descheduler
from rulesched.rules.cel import make_engine
from rulesched.rules.store import RuleStore
from rulesched.writes.evict import ApiEvicter
from rulesched.writes.lease import Elector, LeaseClient, LeaseTimes
from tests.builders import rule_set, write_rules
from tests.kubeapi import KubeAPI, make_cache, wait_for

FAST: dict[str, Any] = {"backoff_initial": 0.02, "backoff_max": 0.1, "connect_timeout": 1.0}
LABELLED = "'filter.xy.com' in node.metadata.labels && node.metadata.labels['filter.xy.com'] == 'yes'"
CLIENT_GO = LeaseTimes.scaled(15.0)
"""client-go's lease times: 15 s, 10 s, 2 s."""
POLICY = "descheduling:\n  action: Evict\n  minAgeSeconds: 0\n  maxEvictionsPerMinute: 600\n"


def rules(expression: str = LABELLED, policy: str = POLICY) -> str:
    spec = f'filters:\n- name: labelled\n  expression: "{expression}"\n  message: not labelled yes\n{policy}'
    return rule_set("xy", spec)


def controlled(
    api: KubeAPI,
    namespace: str,
    name: str,
    node: str = "node-d",
    *,
    spec: Any = None,
    status: Any = None,
    cpu: str = "100m",
    **meta: Any,
) -> str:
    """A running pod on `node` owned by a ReplicaSet, created and placed an hour ago; `meta` updates its
    metadata, `spec` its spec and `status` its status; it requests `cpu`."""
    uid = f"uid-{namespace}-{name}"
    api.add_pod(namespace, name, uid, node, cpu=cpu)
    pod = api.pod_object(namespace, name)
    hour_ago = (datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    pod["metadata"]["creationTimestamp"] = hour_ago
    scheduled = {"type": "PodScheduled", "status": "True", "lastTransitionTime": hour_ago}
    pod["status"] = {"phase": "Running", "conditions": [scheduled], "startTime": hour_ago}
    owner = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "name": f"{name}-rs",
        "uid": f"rs-{name}",
        "controller": True,
    }
    pod["metadata"]["ownerReferences"] = [owner]
    pod["metadata"].update(meta)
    pod["spec"].update(spec or {})
    pod["status"].update(status or {})
    api.update_pod(pod)
    return uid


@dataclass
class Setting:
    api: KubeAPI
    auditor: Auditor
    descheduler: Descheduler
    elector: Elector

    def steps(self, count: int = 3) -> None:
        for _ in range(count):
            self.elector.step()
            self.auditor.step()


@contextmanager
def setting(
    api: KubeAPI,
    access: KubeAccess,
    tmp_path: Path,
    text: str,
    options: DescheduleOptions,
    times: LeaseTimes = CLIENT_GO,
) -> Iterator[Setting]:
    write_rules(tmp_path / "rules", text)
    store = RuleStore([tmp_path / "rules"], make_engine("cpp"))
    assert store.reload() == "loaded"
    placements = PlacementViews()
    nodes, pods = make_cache(access), PodCache(access.api, PodIndex(), placements, **FAST)
    nodes.start()
    pods.start()
    try:
        assert nodes.wait_ready(5)
        assert pods.wait_ready(5)
        auditor = Auditor(store, AuditSources(nodes, pods, placements=placements))
        lease = LeaseClient(access.api, "rulesched-system", "rulesched-descheduler")
        elector = Elector(lease, "me", times)
        auditor.descheduler = Descheduler(options, ApiEvicter(access.api, identity="me"), elector)
        yield Setting(api, auditor, auditor.descheduler, elector)
    finally:
        pods.stop()
        nodes.stop()


def pods_seen(found: Setting, *names: str) -> None:
    """Wait until the pod cache shows `names` on node-d."""

    def seen() -> bool:
        on_d = found.auditor.sources.pods.node_pods("node-d", None).pods
        return set(names) <= {p["metadata"]["name"] for p in on_d}

    wait_for(seen, what=f"{names} in the pod cache")
