"""The metadata tests' fixtures (``zookeeper``, ``chroot``) live in ``tests/conftest.py``, shared
with the cluster tests."""
