import pytest

try:  # tests/ as a package or as a plain directory on sys.path
    from .localindex import LocalIndex
except ImportError:
    from localindex import LocalIndex


@pytest.fixture
def local_index(tmp_path):
    """A LocalIndex under tmp_path (call .add(...), then .serve() for its URL); stopped afterwards."""
    index = LocalIndex(tmp_path / "local-index")
    try:
        yield index
    finally:
        index.close()
