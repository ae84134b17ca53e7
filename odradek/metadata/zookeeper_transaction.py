"""A ZooKeeper ``multi`` from the store's operations (`odradek.metadata.store` `CreateOp`,
`SetOp`, `DeleteOp`, `CheckOp`): each op checked as its single-znode counterpart checks it (a
valid path, data within `store.MAX_DATA_BYTES`, the root never deleted), and the results read back:
a create's path, a set's new version, ``None`` for the rest. A failed ``multi`` applies
nothing; it raises the store's error for the op that failed (not for the others, which kazoo
reports as rolled back). `commit_many` sends many multis before awaiting any answer."""

from __future__ import annotations

from collections.abc import Sequence

from kazoo import exceptions as kz

from odradek.metadata import errors
from odradek.metadata.store import CheckOp, CreateOp, DeleteOp, Op, SetOp, check_data, validate_path
from odradek.metadata.zookeeper_errors import translate, translated


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


def commit_many(client, multis: Sequence[Sequence[Op]]) -> list[list | Exception]:
    """Commit each op list as a ``multi`` of kazoo ``client``, all sent (``commit_async``)
    before the first answer is awaited; ZooKeeper applies one session's requests in order.
    Per multi its results, or the store's error it failed with."""
    pending: list = []
    for ops in multis:
        ops = list(ops)
        transaction = client.transaction()
        for op in ops:
            add_op(transaction, op)
        try:
            with translated():
                pending.append((ops, transaction.commit_async()))
        except errors.StoreError as e:
            pending.append((ops, e))
    out: list[list | Exception] = []
    for ops, sent in pending:
        if isinstance(sent, Exception):
            out.append(sent)
            continue
        try:
            with translated():
                out.append(op_results(ops, sent.get()))
        except errors.StoreError as e:
            out.append(e)
    return out
