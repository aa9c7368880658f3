"""The version of ckpt (also pyproject.toml's; tests/test_packaging.py holds the two equal)."""

__version__ = "0.1.0"
