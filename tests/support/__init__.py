"""What the test packages share: builders, local servers and the real-engine helpers, imported as
`tests.support.<module>` (every test directory is a package under `tests`)."""
