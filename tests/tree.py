"""Build small checkpoint-shaped trees for unit tests of names and the model.

These trees test classification and bookkeeping only; everything that depends on what Spark
actually writes is tested against the real fixtures in fixtures/checkpoints/.
"""

from __future__ import annotations

from pathlib import Path

UUID1 = "11111111-2222-3333-4444-555555555555"
UUID2 = "66666666-7777-8888-9999-000000000000"


def write_tree(root: Path, files: dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def offsets(batch: int, partitions: int = 2, provider: str | None = None) -> bytes:
    conf = f'"spark.sql.shuffle.partitions":"{partitions}"'
    if provider:
        conf += f',"spark.sql.streaming.stateStore.providerClass":"{provider}"'
    meta = f'{{"batchWatermarkMs":0,"batchTimestampMs":{batch},"conf":{{{conf}}}}}'
    return f'v1\n{meta}\n{{"logOffset":{batch}}}'.encode()


def commit(batch: int) -> bytes:
    return b'v1\n{"nextBatchWatermarkMs":0}'
