"""The Blob service's pure rules: the lease state machine ("Lease Blob" outcome tables),
conditional headers, block lists, names, checksums (against Azure's recorded CRC64 values),
list markers and the version-dependent limits."""

from __future__ import annotations

import base64

import pytest
from awscrt.checksums import crc64nvme
from hypothesis import given
from hypothesis import strategies as st

from tabulae.blob.rules import blocks, leases
from tabulae.blob.rules.checksums import Checksums, crc64_of
from tabulae.blob.rules.conditions import Conditions, check, etag_of, modified_second
from tabulae.blob.rules.limits import MIB, max_append, max_block, max_put_blob
from tabulae.blob.rules.names import check_blob_name, check_container_name
from tabulae.blob.service import decode_marker, encode_marker, parse_snapshot, snapshot_time
from tabulae.model.edm import TICKS_PER_SECOND, UNIX_EPOCH_TICKS
from tabulae.model.errors import ServiceError
from tabulae.storage.blobs import Extent, Lease, extent_offsets, prefix_end

A = "00000000-0000-0000-0000-00000000000a"
B = "00000000-0000-0000-0000-00000000000b"
NOW = 1_000_000.0


def code_of(action: object) -> str | None:
    try:
        action()  # type: ignore[operator]
    except ServiceError as error:
        return error.code
    return None


# ------------------------------------------------------------------------------ leases

LEASED = Lease("leased", A, 30, NOW + 30)
INFINITE = Lease("leased", A, -1, 0.0)
BREAKING = Lease("breaking", A, 30, NOW + 10)
BROKEN = Lease("broken", A, 30, NOW - 1)
EXPIRED = Lease("leased", A, 30, NOW - 1)
AVAILABLE = Lease()


def test_time_moves_leases_on() -> None:
    assert leases.current(EXPIRED, NOW).state == "expired"
    assert leases.current(Lease("breaking", A, 30, NOW - 1), NOW).state == "broken"
    assert leases.current(INFINITE, NOW + 10**9).state == "leased"
    assert leases.describe(LEASED, NOW) == ("locked", "leased", "fixed")
    assert leases.describe(INFINITE, NOW) == ("locked", "leased", "infinite")
    assert leases.describe(BREAKING, NOW) == ("locked", "breaking", None)
    assert leases.describe(EXPIRED, NOW) == ("unlocked", "expired", None)


@pytest.mark.parametrize(
    ("lease", "proposed", "outcome"),
    [
        (AVAILABLE, None, "leased"),
        (LEASED, A, "leased"),
        (LEASED, B, "LeaseAlreadyPresent"),
        (LEASED, None, "LeaseAlreadyPresent"),
        (BREAKING, A, "LeaseIsBreakingAndCannotBeAcquired"),
        (BROKEN, B, "leased"),
        (EXPIRED, B, "leased"),
    ],
)
def test_acquire(lease: Lease, proposed: str | None, outcome: str) -> None:
    try:
        result = leases.acquire(lease, NOW, 15, proposed)
    except ServiceError as error:
        assert error.code == outcome
        return
    assert result.state == outcome and result.ends == NOW + 15
    assert result.lease_id == (proposed or result.lease_id)


@pytest.mark.parametrize(
    ("lease", "lease_id", "code"),
    [
        (AVAILABLE, A, "LeaseNotPresentWithLeaseOperation"),
        (LEASED, B, "LeaseIdMismatchWithLeaseOperation"),
        (BREAKING, A, "LeaseIsBrokenAndCannotBeRenewed"),
        (BROKEN, A, "LeaseIsBrokenAndCannotBeRenewed"),
        (LEASED, A, None),
        (EXPIRED, A, None),
    ],
)
def test_renew(lease: Lease, lease_id: str, code: str | None) -> None:
    assert code_of(lambda: leases.renew(lease, NOW, lease_id)) == code


def test_change_release_break() -> None:
    assert leases.change(LEASED, NOW, A, B).lease_id == B
    assert leases.change(LEASED, NOW, B, A).lease_id == A  # idempotent retry of a change
    assert code_of(lambda: leases.change(BREAKING, NOW, A, B)) == "LeaseIsBreakingAndCannotBeChanged"
    assert leases.release(BREAKING, NOW, A).state == "available"
    assert code_of(lambda: leases.release(LEASED, NOW, B)) == "LeaseIdMismatchWithLeaseOperation"
    assert leases.break_lease(INFINITE, NOW, None) == (Lease("broken", A, -1, NOW), 0)
    lease, seconds = leases.break_lease(LEASED, NOW, None)
    assert (lease.state, seconds) == ("breaking", 30)  # a fixed lease breaks when it would end
    lease, seconds = leases.break_lease(LEASED, NOW, 5)
    assert (lease.state, lease.ends, seconds) == ("breaking", NOW + 5, 5)
    lease, seconds = leases.break_lease(BREAKING, NOW, 3)  # a shorter period brings it forward
    assert (lease.ends, seconds) == (NOW + 3, 3)
    assert leases.break_lease(BREAKING, NOW, 50)[1] == 10  # a longer one does not delay it
    assert code_of(lambda: leases.break_lease(AVAILABLE, NOW, None)) == "LeaseNotPresentWithLeaseOperation"


@pytest.mark.parametrize(
    ("lease", "lease_id", "write", "code"),
    [
        (AVAILABLE, None, True, None),
        (AVAILABLE, A, True, "LeaseNotPresentWithBlobOperation"),
        (LEASED, None, True, "LeaseIdMissing"),
        (LEASED, None, False, None),
        (LEASED, A, True, None),
        (LEASED, B, True, "LeaseIdMismatchWithBlobOperation"),
        (LEASED, B, False, "LeaseIdMismatchWithBlobOperation"),
        (BREAKING, A, True, None),
        (BREAKING, None, True, "LeaseIdMissing"),
        (BROKEN, None, True, None),
        (BROKEN, A, True, "LeaseLost"),
        (EXPIRED, A, True, "LeaseLost"),
        (EXPIRED, None, True, None),
    ],
)
def test_what_a_lease_means_for_a_blob_operation(
    lease: Lease, lease_id: str | None, write: bool, code: str | None
) -> None:
    assert code_of(lambda: leases.check_blob_access(lease, NOW, lease_id, write=write)) == code


def test_lease_header_values() -> None:
    assert leases.parse_duration("-1") == -1 and leases.parse_duration("15") == 15
    for bad in ("14", "61", "0", "x"):
        assert code_of(lambda bad=bad: leases.parse_duration(bad)) == "InvalidHeaderValue"
    assert code_of(lambda: leases.parse_duration(None)) == "MissingRequiredHeader"
    assert code_of(lambda: leases.parse_break_period("61")) == "InvalidHeaderValue"
    assert code_of(lambda: leases.parse_lease_id("nope", "x-ms-lease-id")) == "InvalidHeaderValue"


# ------------------------------------------------------------------------------ conditions

TICKS = UNIX_EPOCH_TICKS + 1_700_000_000 * TICKS_PER_SECOND + 1234
ETAG = etag_of(TICKS)
SECOND = modified_second(TICKS)


def status_of(conditions: Conditions, read: bool, ticks: int | None = TICKS) -> int | None:
    try:
        check(conditions, ticks, read=read)
    except ServiceError as error:
        return error.status
    return None


def test_etag_form() -> None:
    assert f"0x{TICKS:X}" == ETAG and SECOND == 1_700_000_000


@pytest.mark.parametrize(
    ("conditions", "read", "status"),
    [
        (Conditions(if_match=(ETAG,)), True, None),
        (Conditions(if_match=("0x1",)), True, 412),
        (Conditions(if_match=("0x1", ETAG)), False, None),  # a list is any of
        (Conditions(if_match=("*",)), False, None),
        (Conditions(if_none_match=(ETAG,)), True, 304),
        (Conditions(if_none_match=(ETAG,)), False, 412),
        (Conditions(if_none_match=("*",)), False, 412),
        (Conditions(if_modified_since=SECOND), True, 304),
        (Conditions(if_modified_since=SECOND - 1), True, None),
        (Conditions(if_unmodified_since=SECOND - 1), True, 412),
        (Conditions(if_unmodified_since=SECOND), False, None),
        (Conditions(if_match=(ETAG,), if_unmodified_since=SECOND - 1), False, None),  # If-Match decides
        (Conditions(if_none_match=("0x1",), if_modified_since=SECOND), True, None),  # If-None-Match decides
    ],
)
def test_conditions(conditions: Conditions, read: bool, status: int | None) -> None:
    assert status_of(conditions, read) == status


def test_read_if_none_match_star_is_unsatisfiable() -> None:
    """A read cannot be asked for only when the resource is missing: 400, met or not."""
    for ticks in (TICKS, None):
        assert status_of(Conditions(if_none_match=("*",)), True, ticks) == 400


def test_conditions_on_a_missing_resource() -> None:
    assert status_of(Conditions(if_match=("*",)), False, None) == 412
    assert status_of(Conditions(if_none_match=("*",)), False, None) is None
    assert status_of(Conditions(if_unmodified_since=0), False, None) is None


# ------------------------------------------------------------------------------ blocks


def ext(block_id: str, length: int = 1) -> Extent:
    return Extent(f"ref-{block_id}", length, block_id)


def test_block_list_resolution() -> None:
    committed = [ext("a"), ext("b")]
    staged = {"b": ext("b", 2), "c": ext("c")}
    resolved = blocks.resolve(
        [("Latest", "b"), ("Committed", "b"), ("Uncommitted", "c"), ("Latest", "a")], committed, staged
    )
    assert [(e.block_id, e.length) for e in resolved] == [("b", 2), ("b", 1), ("c", 1), ("a", 1)]
    for entry in (("Committed", "c"), ("Uncommitted", "a"), ("Latest", "zz")):
        assert code_of(lambda entry=entry: blocks.resolve([entry], committed, staged)) == "InvalidBlockList"
    assert (
        code_of(lambda: blocks.resolve([("Latest", "a")] * 50_001, committed, staged)) == "BlockListTooLong"
    )


def test_block_ids() -> None:
    assert blocks.check_block_id("YWJj") == "YWJj"
    for bad in ("", "abc*", base64.b64encode(b"x" * 65).decode(), "YWJ"):
        assert code_of(lambda bad=bad: blocks.check_block_id(bad)) == "InvalidQueryParameterValue"
    assert code_of(lambda: blocks.check_same_length("YWJj", 8)) == "InvalidBlobOrBlock"
    blocks.check_same_length("OQ==", 1)  # lengths are of the bytes encoded, not of the Base64
    assert code_of(lambda: blocks.check_same_length("MTA=", 1)) == "InvalidBlobOrBlock"


def test_extent_offsets() -> None:
    extents = [Extent("a", 3), Extent("e", 0), Extent("b", 4), Extent("c", 2)]
    spans = [(e.ref, low, high) for e, low, high in extent_offsets(extents, 2, 8)]
    assert spans == [("a", 2, 3), ("b", 0, 4), ("c", 0, 1)]


# ------------------------------------------------------------------------------ names and limits


@pytest.mark.parametrize(
    ("name", "code"),
    [("abc", None), ("a-b-c", None), ("$root", None), ("$logs", None), ("ab", "OutOfRangeInput"),
     ("a" * 64, "OutOfRangeInput"), ("a--b", "InvalidResourceName"), ("ABC", "InvalidResourceName"),
     ("-ab", "InvalidResourceName")],
)  # fmt: skip
def test_container_names(name: str, code: str | None) -> None:
    assert code_of(lambda: check_container_name(name)) == code


def test_blob_names() -> None:
    assert code_of(lambda: check_blob_name("a/../b")) is None
    assert code_of(lambda: check_blob_name("x\uffff")) is None
    assert code_of(lambda: check_blob_name("a\x01")) == "InvalidResourceName"
    assert code_of(lambda: check_blob_name("/" * 254)) == "InvalidResourceName"
    assert code_of(lambda: check_blob_name("x" * 1025)) == "OutOfRangeInput"


def test_limits_by_version() -> None:
    assert max_put_blob("2026-10-06") == 5000 * MIB and max_put_blob("2019-07-07") == 256 * MIB
    assert max_put_blob("2015-04-05") == 64 * MIB
    assert max_block("2019-12-12") == 4000 * MIB and max_block("2018-03-28") == 100 * MIB
    assert max_block("2015-12-11") == 4 * MIB
    assert max_append("2022-11-02") == 100 * MIB and max_append("2021-12-02") == 4 * MIB


# ------------------------------------------------------------------------------ checksums


@pytest.mark.parametrize(
    ("data", "expected"),
    [(b"Hello World", "YeJLfssylmU="), (b"Hello World!", "peH8Xsgc5QI="), (b"hello world", "vo7q9sPVKY0="),
     (b"AAA", "Cc/2Kr4DuKg="), (b"a" * 1024, "ov8U1LLnyKc="), (b"a" * 4096, "Ep3PX5ZZvPI=")],
)  # fmt: skip
def test_crc64_matches_azure(data: bytes, expected: str) -> None:
    assert base64.b64encode(crc64_of(data)).decode() == expected


@given(st.binary(max_size=5000), st.integers(min_value=0, max_value=5000))
def test_crc64_is_microsofts(data: bytes, seed: int) -> None:
    """The same values as the C extension Microsoft ships for its SDKs, chained from any value."""
    from azure.storage.extensions.checksums import crc64

    assert int.from_bytes(crc64_of(data), "little") == crc64.compute(data, 0)
    assert crc64nvme(data, seed) == crc64.compute(data, seed)


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=300))
def test_checksums_chain(data: bytes, cut: int) -> None:
    sums = Checksums(md5=True, crc64=True)
    sums.update(data[:cut])
    sums.update(data[cut:])
    assert sums.crc64 == crc64_of(data)
    sums.verify(sums.md5, sums.crc64)


def test_checksum_mismatches_name_both_values() -> None:
    sums = Checksums(md5=True, crc64=True)
    sums.update(b"Hello World!")
    with pytest.raises(ServiceError) as raised:
        sums.verify(None, bytes(range(1, 9)))
    assert raised.value.code == "Crc64Mismatch"
    assert dict(raised.value.fields) == {
        "UserSpecifiedCrc": "AQIDBAUGBwg=",
        "ServerCalculatedCrc": "peH8Xsgc5QI=",
    }


# ------------------------------------------------------------------------------ markers, snapshots


@given(
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=50),
    st.sampled_from(["~", "2020-01-01T00:00:00.0000000Z"]),
)
def test_markers_round_trip(name: str, version: str) -> None:
    assert decode_marker(encode_marker(name, version)) == (name, version)


def test_snapshot_values() -> None:
    assert parse_snapshot("2022-08-12T20:54:05.5866513Z") == "2022-08-12T20:54:05.5866513Z"
    assert parse_snapshot("2022-08-12T20:54:05Z") == "2022-08-12T20:54:05.0000000Z"
    assert code_of(lambda: parse_snapshot("1")) == "InvalidQueryParameterValue"
    assert snapshot_time(UNIX_EPOCH_TICKS + 1) == "1970-01-01T00:00:00.0000001Z"
    assert code_of(lambda: decode_marker("%%%")) == "InvalidQueryParameterValue"


def test_prefix_end() -> None:
    assert prefix_end("a/") == "a0"
    assert prefix_end("z") == "{"
    assert all(not name.startswith("abc") for name in ["abd", prefix_end("abc")])
