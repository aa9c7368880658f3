"""Process exit codes, the contract with cron jobs and CI systems."""

OK = 0
"""The command ran and found nothing wrong."""

PROBLEMS = 1
"""The command ran and found problems (findings at or above the fail-on level, orphans...)."""

ERROR = 2
"""The command could not run: bad arguments, not a checkpoint, unreadable input."""
