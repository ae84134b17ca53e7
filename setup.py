"""Build of the one C extension; the project's metadata is in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("odradek.client._memory_records_builder",
              ["odradek/client/_memory_records_builder.c"],
              extra_compile_args=["-O2", "-Wall"]),
])
