"""One module per on-disk format Spark writes. Pure functions over names, bytes and text:
nothing here touches storage."""
