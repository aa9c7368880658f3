"""``ckpt convert``: a checkpoint's state moved to the other state store provider (HDFS-backed
<-> RocksDB) as a new batch, with a dry run and an undo."""
