"""How ``checkpoint/`` here was made (PySpark 4.3.0, local[1]): a ``rate`` source (its offset
is a LongOffset, the seconds since the query started, and ``sources/0/0`` holds the start time)
and a ``rate-micro-batch`` source (``{"offset": N, "timestamp": T}``, no source log), a
windowless aggregation with a watermark, stopped after batch 3 committed, so batch 4 is in
flight. Usage: ``python make.py OUT_DIR``.
"""

import sys
import time

from pyspark.sql import SparkSession

out = sys.argv[1]
spark = (
    SparkSession.builder.master("local[1]")
    .appName("ckpt-rate-fixture")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .getOrCreate()
)
rate = spark.readStream.format("rate").option("rowsPerSecond", 5).load()
micro = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 3).load()
query = (
    rate.union(micro)
    .withWatermark("timestamp", "1 second")
    .groupBy((rate.value % 3).alias("k"))
    .count()
    .writeStream.format("noop")
    .outputMode("update")
    .option("checkpointLocation", out)
    .trigger(processingTime="1 second")
    .start()
)
deadline = time.time() + 60
while time.time() < deadline and (query.lastProgress is None or query.lastProgress["batchId"] < 3):
    time.sleep(0.5)
query.stop()
spark.stop()
