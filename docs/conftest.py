def pytest_configure(config):
    # The same marker as tests/conftest.py's, for runs of docs/ alone.
    config.addinivalue_line(
        "markers", "noleakcheck: the refcount gate runs this test once, unmeasured")
