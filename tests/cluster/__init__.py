"""Tests of `rulesched.cluster`: node, pod and metrics sources against loopback servers, node contexts."""
