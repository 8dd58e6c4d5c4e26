"""The test suite; its folders mirror the repository's packages (``pytest.ini`` puts the root on the path)."""
