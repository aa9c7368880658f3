"""``ckpt repartition``: change a stateful query's number of state partitions offline, writing
what Spark 4.3's own repartition (``OfflineStateRepartitionRunner``) writes.

``keys``: which new partition each state row goes to (Spark's shuffle hash of the operator's
partitioning columns); ``placement``: that, for the raw records of a store; ``plan``: the
plan (``plan_repartition``); ``apply``: writing it (``repartition``, a new batch through
``change.batch``); ``run``: the command as one call (``change.flow``) and ``--undo``;
``logs``: the operator metadata with the new count. A repartition started and not committed
is the core's to tell (``core.unfinished``): validate, cleanup and repair ask it too.
"""
