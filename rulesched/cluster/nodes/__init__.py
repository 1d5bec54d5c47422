"""The cluster's nodes: the node cache (list+watch, nodecache.py) and the names asked for that it does not
know (unknown_nodes.py)."""
