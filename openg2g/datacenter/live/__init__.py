"""A live datacenter: real inference servers and measured GPU power in the loop."""
