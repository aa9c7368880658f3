"""``ckpt repartition``: change a stateful query's number of state partitions offline, writing
what Spark 4.3's own repartition (``OfflineStateRepartitionRunner``) writes.

``keys``: which new partition each state row goes to (Spark's shuffle hash of the operator's
partitioning columns); ``placement``: that, for the raw records of a store; ``plan``: the
plan (``plan_repartition``); ``apply``: writing it (``repartition``); ``run``: the command
as one call and ``--undo``; ``unfinished``: a repartition started and not committed.
"""
