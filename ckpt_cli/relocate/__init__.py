"""``ckpt relocate``: a checkpoint copied to a new home (local, S3, ADLS, GCS) with the
absolute references Spark recorded rewritten, so that the copy restarts."""
