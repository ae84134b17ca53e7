"""Build of the C extensions (the producer's once-per-record steps); the project's metadata is
in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension(f"odradek.client.{name}", [f"odradek/client/{name}.c"], extra_compile_args=["-O2", "-Wall"])
    for name in ("_memory_records_builder", "_murmur2")
])
