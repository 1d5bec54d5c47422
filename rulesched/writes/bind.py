"""Binding pods to nodes through the API (`--enable-bind`): what the extender's /bind does.

A bind is one POST of a Binding to `/api/v1/namespaces/{ns}/pods/{name}/binding`, carrying the pod's
uid as a precondition so that a pod deleted and re-created under the same name is never bound by
mistake. The answer is read raw: the client's model deserialization of the returned Binding is a known
source of spurious failures and we need nothing from it. A refusal is data, not an exception: `bind`
returns the API's Status message, which the extender hands to kube-scheduler.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes.client import CoreV1Api, V1Binding, V1ObjectMeta, V1ObjectReference

from rulesched.cluster.kube.access import finish
from rulesched.cluster.kube.errors import ApiError, api_errors

log = logging.getLogger(__name__)


class ApiBinder:
    """A Binder that creates the Binding through the Kubernetes API."""

    def __init__(self, api: Any, *, timeout: float = 10.0) -> None:
        self._core = CoreV1Api(api)
        self._timeout = timeout

    def bind(self, namespace: str, name: str, uid: str, node: str) -> str:
        """Bind the pod to the node; "" on success, else the API's reason. Blocks up to `timeout`."""
        body = V1Binding(
            metadata=V1ObjectMeta(name=name, namespace=namespace, uid=uid or None),
            target=V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            with api_errors():
                response = self._core.create_namespaced_pod_binding(
                    name, namespace, body, _preload_content=False, _request_timeout=self._timeout
                )
            finish(response)
        except ApiError as error:
            reason = error.message
        except Exception as error:  # connection refused, timeout: the scheduler will retry the pod
            reason = f"binding {namespace}/{name} to {node} failed: {type(error).__name__}: {error}"
        else:
            return ""
        log.warning("bind %s/%s to %s refused: %s", namespace, name, node, reason)
        return reason
