"""Build of the C extensions; the project's metadata is in pyproject.toml.

- ``client/_memory_records_builder``, ``client/_murmur2``: the producer's once-per-record steps;
- ``protocol/_produce_codec``, ``records/_log_validator``, ``storage/_fast_append``: the broker's
  produce fast path (``server/produce_fast_path.py``).

Each extension depends on the headers of its directory (``records/record_walk.h``), so that a
change to one rebuilds it.
"""

from glob import glob

from setuptools import Extension, setup

MODULES = ("client._memory_records_builder", "client._murmur2", "protocol._produce_codec",
           "records._log_validator", "storage._fast_append")

setup(ext_modules=[
    Extension(f"odradek.{name}", [f"odradek/{name.replace('.', '/')}.c"],
              depends=sorted(glob(f"odradek/{name.split('.')[0]}/*.h")), extra_compile_args=["-O2", "-Wall"])
    for name in MODULES
])
