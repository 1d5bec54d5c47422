"""The pods and namespaces around a node: the pod index rules read (index.py), the live pod and namespace
caches (podcache.py), the namespaces given once (namespaces.py) and the descheduler's views of the pods
(placement_view.py)."""
