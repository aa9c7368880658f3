"""The checkpoint core: what a checkpoint is and what rebuilds its state, below every command.

* :mod:`.layout`: what each listed file is, from its path alone;
* :mod:`.model`: the checkpoint as one listing shows it (``Checkpoint``: batches, operators,
  stores, partitions, versions; log entries parsed on first use);
* :mod:`.rebuild`: which files rebuild a store partition's version, as Spark loads it
  (snapshot + deltas, zip + changelogs, the format-v2 lineage), and the change feed's files;
* :mod:`.read`: the raw records of those files, and a version's state rebuilt from them;
* :mod:`.loadable`: whether a plan's files load (their bytes, before a row is read);
* :mod:`.history`: the operator metadata and state schema files in force at each batch;
* :mod:`.untracked`: RocksDB files no zip names, attempts the commit log did not choose;
* :mod:`.unfinished`: a repartition started and not committed;
* :mod:`.activity`: whether the query is running (its newest batch's two clocks);
* :mod:`.kernel`: the compiled replay kernel, where it is built.

It imports the formats, the storage and the base modules only (an import contract in
pyproject.toml says so).
"""
