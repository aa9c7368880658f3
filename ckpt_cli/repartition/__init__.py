"""``ckpt repartition``: change a stateful query's number of state partitions offline, writing
what Spark 4.3's own repartition (``OfflineStateRepartitionRunner``) writes.

``keys``: which new partition each state row goes to (Spark's shuffle hash of the operator's
partitioning columns).
"""
