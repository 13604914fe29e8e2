"""The engine tests use the engine, base_image and registry fixtures of tests/conftest.py."""
