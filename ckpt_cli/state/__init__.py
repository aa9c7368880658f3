"""A store's state decoded, in the row shape of Spark's ``statestore`` source: what
``replay`` writes, ``validate --deep`` samples and ``repartition`` places.

* :mod:`.target`: what to read (batch -> store version, operator, store, partitions);
* :mod:`.reader`: ``read_state`` -> ``StateRows`` (every partition planned, best-effort
  fallbacks noted; rows, Arrow tables, pandas);
* :mod:`.decoders`: raw records -> rows with plain JSON values (``RowDecoder``);
* :mod:`.families`, :mod:`.join_families`, :mod:`.tws`: the column families of
  transformWithState variables and timers and of stream-stream joins;
* :mod:`.bulk`, :mod:`.bulk_rocksdb`, :mod:`.columns`, :mod:`.plain_arrow`: the same rows in
  columns, a partition merged in bulk (by the compiled kernel where it is built);
* :mod:`.ordered`: partitions read side by side in threads, given in partition order.

Below the commands, above the core.
"""
