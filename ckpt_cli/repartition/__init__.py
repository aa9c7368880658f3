"""Repartition: a stateful query's state rewritten from N to M partitions, offline.

``keys``: which new partition each state row goes to (Spark's shuffle hash of the operator's
partitioning columns).
"""
