"""`rulesched config`: generated configuration, for kube-scheduler (`scheduler`), the docs (`reference`) and
Grafana (`dashboard`)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from rulesched.cli.common import fail


def add(commands: Any) -> None:
    config = commands.add_parser("config", help="generate configuration for the components around rulesched")
    kinds = config.add_subparsers(dest="config_kind", required=True, metavar="KIND")
    _scheduler_parser(kinds)
    reference = kinds.add_parser("reference", help="the settings reference (docs/operations/configuration.md)")
    reference.set_defaults(run=run_reference)
    dashboard = kinds.add_parser("dashboard", help="the Grafana dashboard (deploy/components/monitoring/)")
    dashboard.set_defaults(run=run_dashboard)


def _scheduler_parser(kinds: Any) -> None:
    scheduler = kinds.add_parser("scheduler", help="a KubeSchedulerConfiguration calling rulesched")
    add = scheduler.add_argument
    add("--url", default="http://127.0.0.1:8888", help="the extender's URL prefix (default %(default)s)")
    add("--weight", type=int, default=1, help="prioritize weight, > 0 (default %(default)s)")
    add("--node-cache", action=argparse.BooleanOptionalAction, default=True, help="names mode (default on)")
    add("--bind", action="store_true", help="let rulesched bind (serve it with --enable-bind)")
    add("--preempt", action="store_true", help="ask rulesched which preemption victims are acceptable")
    add("--timeout", default="5s", help="httpTimeout, a Go duration (default %(default)s)")
    add("--request-deadline", type=float, default=2.0, help="the server's --request-deadline (default %(default)s)")
    add("--ignorable", action="store_true", help="on extender errors schedule without it instead of failing")
    add("--scheduler-name", help="run as a second scheduler: its profile name and leader election lease")
    add("--namespace", default="rulesched-system", help="the lease's namespace (default %(default)s)")
    add("--kubeconfig", help="clientConnection.kubeconfig (default: in-cluster)")
    add("--tls-ca-file", help="verify the extender's certificate with this CA (sets enableHTTPS)")
    add("--tls-cert-file", help="client certificate kube-scheduler presents")
    add("--tls-key-file", help="its private key")
    add("--tls-server-name", help="the name to verify in the extender's certificate")
    add("--managed-resource", action="append", default=[], metavar="NAME", help="only send pods requesting NAME")
    scheduler.set_defaults(run=run_scheduler)


def run_scheduler(args: argparse.Namespace) -> int:
    from rulesched.tools.scheduler_config import ConfigError, SchedulerOptions, render_configuration

    options = SchedulerOptions(
        url=args.url,
        weight=args.weight,
        node_cache=args.node_cache,
        bind=args.bind,
        preempt=args.preempt,
        timeout=args.timeout,
        request_deadline=args.request_deadline,
        scheduler_name=args.scheduler_name,
        namespace=args.namespace,
        kubeconfig=args.kubeconfig,
        tls_ca_file=args.tls_ca_file,
        tls_cert_file=args.tls_cert_file,
        tls_key_file=args.tls_key_file,
        tls_server_name=args.tls_server_name,
        ignorable=args.ignorable,
        managed_resources=tuple(args.managed_resource),
    )
    try:
        sys.stdout.write(render_configuration(options))
    except ConfigError as error:
        return fail(str(error), 2)
    return 0


def run_reference(args: argparse.Namespace) -> int:
    from rulesched.cli.reference import configuration_reference

    sys.stdout.write(configuration_reference())
    return 0


def run_dashboard(args: argparse.Namespace) -> int:
    from rulesched.tools.dashboard import render

    sys.stdout.write(render())
    return 0
