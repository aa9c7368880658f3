"""The change engine: what every command that changes a checkpoint shares (``cleanup``,
``repair``, ``repartition``, and what comes next: conversions, relocation, state edits).

* :mod:`.safety`: the checks made before anything changes (a minimum age, an active query,
  young files, symbolic links), and the warnings a dry run gives instead of refusing;
* :mod:`.lock`: the checkpoint lock every change holds;
* :mod:`.manifest`: the write-ahead manifest and the quarantine beside the checkpoint (a
  change is recorded before it is made, so any interruption can be undone);
* :mod:`.undo`: putting back what a manifest lists, byte for byte;
* :mod:`.flow`: plan -> safety checks -> confirm -> lock -> apply -> validate, as one call;
* :mod:`.batch`: the writer of a new batch (``offsets/N+1``, state version N+2, operator
  metadata, ``commits/N+1``) in the order a kill leaves restartable.

A new command that changes a checkpoint is a plan and a list of files to write.
"""
