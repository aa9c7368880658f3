"""``ckpt state delete``: keys removed from a stateful query's state offline, as a new batch
Spark restarts from (poison keys, erasure requests, runaway state)."""
