"""The package version. pyproject.toml states it too (maturin reads only that file), and
native/Cargo.toml for the crate; tests/test_docs.py fails when they differ."""

__version__ = "0.1.0"
