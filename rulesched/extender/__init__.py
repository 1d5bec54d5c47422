"""The HTTP edge: kube-scheduler's extender verbs over the rule engine."""
