"""Makes `tests/` importable from every test folder (pytest puts a conftest's folder on
sys.path), for helpers shared across folders such as `google_reference`."""
