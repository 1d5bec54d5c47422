"""Seeded, realistic benchmark inputs: nodes, pods, a NodeMetricsList, and the rule files under test.

Nodes look like what a cloud kubelet reports (about 12 KB of JSON each: ~20 labels, annotations,
taints on some, capacity/allocatable, 5 conditions, 40 images); pods look like what a Deployment
creates. Everything comes from one `random.Random(seed)`, so two runs send the same bytes.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

ZONES = ("eu-west-1a", "eu-west-1b", "eu-west-1c")
ZONE_LABEL = "topology.kubernetes.io/zone"
XY_LABEL = "filter.xy.com"

FOUNDING_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: xy-least-cpu
spec:
  matchConditions:
  - name: not-system
    expression: pod.metadata.namespace != 'kube-system'
  variables:
  - name: cpuUsed
    expression: metrics.cpu.usage
  filters:
  - name: require-xy-label
    expression: "has(node.metadata.labels) && 'filter.xy.com' in node.metadata.labels"
    message: missing label filter.xy.com
  scores:
  - name: least-cpu
    expression: -variables.cpuUsed
"""

POD_RULES = """\
apiVersion: rulesched.io/v1alpha1
kind: RuleSet
metadata:
  name: zone-and-ready
spec:
  filters:
  - name: same-zone
    expression: >-
      !has(pod.metadata.labels) || !('topology.kubernetes.io/zone' in pod.metadata.labels)
      || (has(node.metadata.labels) && 'topology.kubernetes.io/zone' in node.metadata.labels
          && node.metadata.labels['topology.kubernetes.io/zone'] == pod.metadata.labels['topology.kubernetes.io/zone'])
    message: not in the pod's zone
  - name: node-ready
    expression: "node.status.conditions.exists(c, c.type == 'Ready' && c.status == 'True')"
    message: node is not Ready
"""

RULE_SETS: dict[str, tuple[str, ...]] = {
    "founding": (FOUNDING_RULES,),
    "pod-dependent": (FOUNDING_RULES, POD_RULES),
}
"""Rule set name → rule files: (a) the founding example alone, (b) plus a pod-dependent rule and a Ready filter."""


def _hex(rng: random.Random, length: int) -> str:
    return f"{rng.getrandbits(4 * length):0{length}x}"


def _labels(rng: random.Random, name: str, zone: str) -> dict[str, str]:
    instance = rng.choice(("m5.2xlarge", "m5.4xlarge", "c5.4xlarge", "r5.2xlarge"))
    labels = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/instance-type": instance,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": rng.choice(("ON_DEMAND", "SPOT")),
        "eks.amazonaws.com/nodegroup": f"workers-{rng.randint(1, 6)}",
        "eks.amazonaws.com/nodegroup-image": f"ami-{_hex(rng, 17)}",
        "eks.amazonaws.com/sourceLaunchTemplateId": f"lt-{_hex(rng, 17)}",
        "eks.amazonaws.com/sourceLaunchTemplateVersion": str(rng.randint(1, 40)),
        "failure-domain.beta.kubernetes.io/region": "eu-west-1",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": _hex(rng, 32),
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": instance,
        "team.example.com/pool": rng.choice(("batch", "web", "data", "ml")),
        "topology.ebs.csi.aws.com/zone": zone,
        "topology.kubernetes.io/region": "eu-west-1",
        ZONE_LABEL: zone,
    }
    if rng.random() < 0.8:
        labels[XY_LABEL] = "true"
    return labels


def _conditions(rng: random.Random, ready: bool) -> list[dict[str, str]]:
    stamp = f"2026-11-{rng.randint(1, 20):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z"
    kinds = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        ("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
        ("Ready", "True" if ready else "False", "KubeletReady", "kubelet is posting ready status"),
    ]
    return [
        {"type": t, "status": s, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp, "reason": r, "message": m}
        for t, s, r, m in kinds
    ]


def _images(rng: random.Random) -> list[dict[str, Any]]:
    images = []
    for index in range(40):
        repo = f"registry.example.com/team-{index % 9}/service-{rng.randint(0, 400)}"
        digest = _hex(rng, 64)
        images.append(
            {
                "names": [f"{repo}@sha256:{digest}", f"{repo}:v1.{rng.randint(0, 99)}.{rng.randint(0, 9)}"],
                "sizeBytes": rng.randint(5_000_000, 900_000_000),
            }
        )
    return images


def make_node(rng: random.Random, index: int) -> dict[str, Any]:
    """One node of a large EKS-like cluster; about 12 KB of JSON."""
    name = f"ip-10-{index // 250}-{index % 250}-{rng.randint(1, 250)}.eu-west-1.compute.internal"
    zone = ZONES[index % len(ZONES)]
    cpu, memory = rng.choice(((8, 32), (16, 64), (16, 32), (8, 64)))
    capacity = {
        "attachable-volumes-aws-ebs": "25",
        "cpu": str(cpu),
        "ephemeral-storage": "104845292Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": f"{memory * 1024 * 1024 - 500000}Ki",
        "pods": "110",
    }
    allocatable = dict(capacity, cpu=f"{cpu * 1000 - 90}m", memory=f"{memory * 1024 * 1024 - 1200000}Ki")
    node: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}",
            "resourceVersion": str(rng.randint(10_000_000, 99_999_999)),
            "creationTimestamp": "2026-10-01T08:00:00Z",
            "labels": _labels(rng, name, zone),
            "annotations": {
                "alpha.kubernetes.io/provided-node-ip": f"10.{index // 250}.{index % 250}.7",
                "csi.volume.kubernetes.io/nodeid": f'{{"ebs.csi.aws.com":"i-{_hex(rng, 17)}"}}',
                "node.alpha.kubernetes.io/ttl": "0",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                "cluster-autoscaler.kubernetes.io/scale-down-disabled": "false",
            },
        },
        "spec": {"providerID": f"aws:///{zone}/i-{_hex(rng, 17)}"},
        "status": {
            "capacity": capacity,
            "allocatable": allocatable,
            "conditions": _conditions(rng, ready=rng.random() < 0.95),
            "addresses": [
                {"type": "InternalIP", "address": f"10.{index // 250}.{index % 250}.7"},
                {"type": "Hostname", "address": name},
                {"type": "InternalDNS", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "machineID": _hex(rng, 32),
                "systemUUID": _hex(rng, 32),
                "bootID": _hex(rng, 32),
                "kernelVersion": "5.10.228-219.884.amzn2.x86_64",
                "osImage": "Amazon Linux 2",
                "containerRuntimeVersion": "containerd://1.7.23",
                "kubeletVersion": "v1.32.3-eks-473151a",
                "kubeProxyVersion": "v1.32.3-eks-473151a",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "images": _images(rng),
        },
    }
    if rng.random() < 0.2:
        node["spec"]["taints"] = [{"key": "dedicated", "value": rng.choice(("batch", "ml")), "effect": "NoSchedule"}]
    return node


def make_metrics(rng: random.Random, nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """A metrics.k8s.io NodeMetricsList with a sample for every node but a few."""
    items = []
    for node in nodes:
        if rng.random() < 0.02:
            continue  # a node metrics-server has not scraped yet
        items.append(
            {
                "metadata": {"name": node["metadata"]["name"]},
                "timestamp": "2026-11-22T01:00:00Z",
                "window": "15.012s",
                "usage": {
                    "cpu": f"{rng.randint(50_000_000, 15_000_000_000)}n",
                    "memory": f"{rng.randint(1, 60_000_000)}Ki",
                },
            }
        )
    return {"apiVersion": "metrics.k8s.io/v1beta1", "kind": "NodeMetricsList", "metadata": {}, "items": items}


def _container(rng: random.Random, name: str, app: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": f"registry.example.com/{app}/{name}:v2.{rng.randint(0, 30)}.1",
        "ports": [{"containerPort": 8080, "protocol": "TCP", "name": "http"}],
        "env": [{"name": f"SETTING_{i}", "value": _hex(rng, 12)} for i in range(6)],
        "resources": {
            "requests": {"cpu": f"{rng.choice((100, 250, 500, 1000))}m", "memory": f"{rng.choice((128, 256, 512))}Mi"},
            "limits": {"memory": "1Gi"},
        },
        "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        "terminationMessagePath": "/dev/termination-log",
        "imagePullPolicy": "IfNotPresent",
    }


def make_pod(rng: random.Random, workload: int, replica: int, namespace: str = "team-a") -> dict[str, Any]:
    """Replica `replica` of workload `workload`: replicas differ only in name, uid and pod-template-hash-free fields."""
    template = random.Random(workload * 7919 + 17)  # the workload's template is fixed by its number
    app = f"service-{workload}"
    template_hash = _hex(template, 10)
    labels = {"app": app, "pod-template-hash": template_hash, ZONE_LABEL: ZONES[workload % len(ZONES)]}
    containers = [_container(template, name, app) for name in ("app", "sidecar")[: 1 + workload % 2]]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{app}-{template_hash}-{_hex(rng, 5)}",
            "generateName": f"{app}-{template_hash}-",
            "namespace": namespace,
            "uid": f"{_hex(rng, 8)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 4)}-{_hex(rng, 12)}",
            "labels": labels,
            "ownerReferences": [
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "name": f"{app}-{template_hash}",
                    "uid": _hex(template, 32),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "containers": containers,
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default",
            "schedulerName": "default-scheduler",
            "tolerations": [
                {
                    "key": "node.kubernetes.io/not-ready",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                },
            ],
            "volumes": [
                {"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
            ],
            "priority": 0,
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"},
    }


@dataclass(frozen=True)
class Workload:
    """Nodes, their metrics, and a generator of pods; all derived from one seed."""

    nodes: list[dict[str, Any]]
    metrics: dict[str, Any]
    seed: int

    def pod(self, number: int, replica: int = 0, namespace: str = "team-a") -> dict[str, Any]:
        """Replica `replica` of workload `number`; the same arguments give the same pod."""
        rng = random.Random(self.seed * 1_000_003 + number * 10_007 + replica)
        return make_pod(rng, number, replica, namespace)

    def pods(self, count: int, *, replicas: bool) -> list[dict[str, Any]]:
        """`count` pods: all replicas of workload 0, or each from a new workload (1, 2, …)."""
        return [self.pod(0, i) if replicas else self.pod(1 + i) for i in range(count)]


def make_workload(node_count: int, seed: int = 42) -> Workload:
    rng = random.Random(seed)
    nodes = [make_node(rng, i) for i in range(node_count)]
    return Workload(nodes=nodes, metrics=make_metrics(rng, nodes), seed=seed)
