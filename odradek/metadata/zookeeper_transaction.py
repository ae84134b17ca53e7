"""A ZooKeeper ``multi`` from the store's operations (`odradek.metadata.store` `CreateOp`,
`SetOp`, `DeleteOp`, `CheckOp`): each op checked as its single-znode counterpart checks it (a
valid path, data within `store.MAX_DATA_BYTES`, the root never deleted), and the results read back:
a create's path, a set's new version, ``None`` for the rest. A failed ``multi`` applies
nothing; it raises the store's error for the op that failed (not for the others, which kazoo
reports as rolled back)."""

from __future__ import annotations

from collections.abc import Sequence

from kazoo import exceptions as kz

from odradek.metadata import errors
from odradek.metadata.store import CheckOp, CreateOp, DeleteOp, Op, SetOp, check_data, validate_path
from odradek.metadata.zookeeper_errors import translate


def add_op(transaction, op: Op) -> None:
    """Add ``op`` to a kazoo ``transaction``."""
    if isinstance(op, CreateOp):
        validate_path(op.path + "0" if op.sequential else op.path)
        transaction.create(
            op.path, check_data(op.data), ephemeral=op.ephemeral, sequence=op.sequential
        )
    elif isinstance(op, SetOp):
        transaction.set_data(validate_path(op.path), check_data(op.data), op.version)
    elif isinstance(op, DeleteOp):
        if validate_path(op.path) == "/":
            raise errors.InvalidPathError("the root znode cannot be deleted")
        transaction.delete(op.path, op.version)
    elif isinstance(op, CheckOp):
        transaction.check(validate_path(op.path), op.version)
    else:
        raise TypeError(f"not a store operation: {op!r}")


def _result(op: Op, result: object) -> str | int | None:
    if isinstance(op, CreateOp):
        return result
    if isinstance(op, SetOp):
        return result.version
    return None


def op_results(ops: Sequence[Op], results: list) -> list[str | int | None]:
    """The results of a committed ``multi``, or the store's error for the op that failed."""
    failures = [r for r in results if isinstance(r, Exception)]
    if failures:
        raise translate(next((r for r in failures if not isinstance(r, kz.RolledBackError)), failures[0]))
    return [_result(op, r) for op, r in zip(ops, results)]
