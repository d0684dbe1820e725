"""The data-protection model (tests/blob_model.py) against invariants that follow from Azure's
documented behaviour, so that the oracle later integration tests trust is itself checked."""

from __future__ import annotations

from datetime import timedelta

from hypothesis import given, settings

from tests.blob_model import BlobModel, ModelError, Op, apply, operations


def _check_invariants(model: BlobModel) -> None:
    for state in model.blobs.values():
        assert state.versions  # a blob with nothing left is not listed at all
        if state.current is not None:
            assert state.current == max(state.versions)  # the current version is the newest
            assert state.versions[state.current].deletion is None
        for version in state.versions.values():
            if version.deletion is not None:
                assert not version.deletion.purged(model.now)
    listing = model.listing()
    assert listing == sorted(listing)
    assert len({(e.name, e.version_id) for e in listing}) == len(listing)
    for e in listing:
        assert (e.remaining_days is not None) == e.deleted
        assert not (e.deleted and e.is_current)


@settings(max_examples=300, deadline=None)
@given(operations())
def test_invariants_hold_after_any_sequence(ops: list[Op]) -> None:
    model = BlobModel()
    written: dict[str, bytes] = {}
    for op in ops:
        result = apply(model, op)
        if op.kind in ("write", "promote") and isinstance(result, str):
            written[op.name] = model.read(op.name)
        if op.kind == "delete" and not isinstance(result, ModelError):
            written.pop(op.name, None)
        _check_invariants(model)
        for name, content in written.items():
            assert model.read(name) == content  # the base blob reads the last write or promotion


def test_overwrite_keeps_the_previous_version() -> None:
    m = BlobModel()
    v1 = m.write("a", b"one")
    v2 = m.write("a", b"two")
    assert v1 < v2 and m.read("a") == b"two" and m.read("a", v1) == b"one"
    assert [(e.version_id, e.is_current) for e in m.listing()] == [(v1, False), (v2, True)]


def test_delete_leaves_previous_versions_and_no_current() -> None:
    m = BlobModel()
    v1 = m.write("a", b"one")
    m.delete("a")
    assert isinstance(apply(m, Op("delete", "a")), ModelError)
    try:
        m.read("a")
        raise AssertionError("read of a deleted base blob")
    except ModelError as error:
        assert (error.status, error.code) == (404, "BlobNotFound")
    assert [(e.version_id, e.is_current, e.deleted) for e in m.listing()] == [(v1, False, False)]
    v2 = m.promote("a", v1)
    assert m.read("a") == b"one" and v2 > v1


def test_version_soft_delete_undelete_and_purge() -> None:
    m = BlobModel(retention_days=2)
    v1 = m.write("a", b"one")
    m.write("a", b"two")
    m.delete_version("a", v1)
    (entry,) = [e for e in m.listing() if e.version_id == v1]
    assert entry.deleted and entry.remaining_days == 1
    promoted = apply(m, Op("promote", "a", pick=0))  # v1, soft-deleted: not readable, not copyable
    assert isinstance(promoted, ModelError) and promoted.status == 404
    m.advance(timedelta(days=1))
    assert [e.remaining_days for e in m.listing() if e.version_id == v1] == [0]
    m.undelete("a")
    assert m.read("a", v1) == b"one"
    m.delete_version("a", v1)
    m.set_retention(1)
    m.advance(timedelta(days=2) - timedelta(microseconds=1))
    assert any(e.version_id == v1 for e in m.listing())  # retention of the day it was deleted
    m.advance(timedelta(microseconds=1))
    assert all(e.version_id != v1 for e in m.listing())
    m.undelete("a")
    assert all(e.version_id != v1 for e in m.listing())


def test_everything_purged_removes_the_name() -> None:
    m = BlobModel(retention_days=1)
    v1 = m.write("a", b"one")
    v2 = m.write("b", b"two")
    m.delete("a")
    m.delete_version("a", v1)
    assert [(e.name, e.deleted) for e in m.listing()] == [("a", True), ("b", False)]
    m.advance(timedelta(days=1))
    assert [e.version_id for e in m.listing()] == [v2] and "a" not in m.blobs
    undeleted = apply(m, Op("undelete", "a"))
    assert isinstance(undeleted, ModelError) and undeleted.code == "BlobNotFound"
