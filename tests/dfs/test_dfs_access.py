"""ACLs enforced for bearer callers of an HNS account (``--oauth basic`` over HTTPS), through
``azure-storage-file-datalake`` and ``azure-storage-blob`` (sync and aio) on every store: a
token's ``oid`` needs execute on every directory above a path (the root included) and what the
operation needs of the parent and the path; Shared Key callers are superusers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import (
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    make_jwt,
)

ALICE = "00000000-0000-0000-0000-00000000a11c"
BOB = "00000000-0000-0000-0000-000000000b0b"
TEAM = "00000000-0000-0000-0000-0000000000ee"


@pytest.fixture
def server(oauth_hns_server: ServerProcess) -> ServerProcess:
    return oauth_hns_server


def _url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


def _token(oid: str, groups: list[str] | None = None) -> str:
    return make_jwt(extra={"oid": oid, "groups": groups or []})


def _as(
    server: ServerProcess, cert: SelfSignedCert, oid: str, groups: list[str] | None = None
) -> DataLakeServiceClient:
    return DataLakeServiceClient(
        _url(server),
        StaticTokenCredential(_token(oid, groups)),
        connection_verify=str(cert.cert),
        retry_total=0,
    )


@pytest.fixture
def admin_fs(server: ServerProcess, cert: SelfSignedCert) -> Iterator[FileSystemClient]:
    """A file system made with the account key (a superuser): root ``rwxr-x--x`` so that others
    may traverse it, ``data`` (``rwx------``) holding ``data/secret``."""
    admin = DataLakeServiceClient(
        _url(server), {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}, connection_verify=str(cert.cert)
    )
    fs = admin.create_file_system("acl" + uuid.uuid4().hex[:10])
    fs._get_root_directory_client().set_access_control(permissions="rwxr-x--x")
    data = fs.create_directory("data")
    data.set_access_control(permissions="rwx------")
    secret = fs.create_file("data/secret")
    secret.upload_data(b"classified", overwrite=True)
    secret.set_access_control(permissions="rw-------")
    yield fs
    fs.delete_file_system()


def _status(call) -> int:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as raised:
        call()
    return int(raised.value.status_code or 0)


def test_reads_need_execute_above_and_read_on_the_file(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    alice = _as(server, cert, ALICE).get_file_system_client(admin_fs.file_system_name)
    secret = alice.get_file_client("data/secret")
    assert _status(lambda: secret.download_file().readall()) == 403
    assert _status(lambda: list(alice.get_paths(path="data"))) == 403
    admin_fs.get_directory_client("data").set_access_control(
        acl="user::rwx,group::---,other::---,user:" + ALICE + ":--x"
    )
    assert _status(lambda: secret.download_file().readall()) == 403  # traverse alone reads nothing
    admin_fs.get_file_client("data/secret").set_access_control(
        acl=f"user::rw-,group::---,other::---,user:{ALICE}:r--"
    )
    assert secret.download_file().readall() == b"classified"
    assert _status(lambda: secret.upload_data(b"mine", overwrite=True)) == 403
    assert _status(lambda: list(alice.get_paths(path="data"))) == 403  # listing needs r-x
    bob = _as(server, cert, BOB).get_file_system_client(admin_fs.file_system_name)
    assert _status(lambda: bob.get_file_client("data/secret").download_file().readall()) == 403
    # the same rule through the Blob API, on the same port
    blob = BlobClient(
        _url(server), admin_fs.file_system_name, "data/secret",
        credential=StaticTokenCredential(_token(ALICE)), connection_verify=str(cert.cert), retry_total=0,
    )  # fmt: skip
    assert blob.download_blob().readall() == b"classified"
    assert _status(lambda: blob.upload_blob(b"x", overwrite=True)) == 403
    # no execute on the root: nothing below it
    admin_fs._get_root_directory_client().set_access_control(permissions="rwxr-x---")
    assert _status(lambda: secret.download_file().readall()) == 403


def test_creates_need_write_and_execute_on_the_parent(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    alice = _as(server, cert, ALICE).get_file_system_client(admin_fs.file_system_name)
    assert _status(lambda: alice.create_file("data/mine")) == 403
    admin_fs.get_directory_client("data").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{ALICE}:rwx"
    )
    mine = alice.create_file("data/mine")
    mine.upload_data(b"hers", overwrite=True)
    assert mine.get_access_control()["owner"] == ALICE
    mine.set_access_control(permissions="rw-r-----")  # the owner sets its permissions
    secret = alice.get_file_client("data/secret")
    assert _status(lambda: secret.set_access_control(permissions="rw-rw-rw-")) == 403  # not hers
    assert _status(lambda: mine.set_access_control(owner=BOB)) == 403  # only a superuser
    assert _status(lambda: alice.create_file("elsewhere")) == 403  # root: r-x for others
    mine.rename_file(f"{admin_fs.file_system_name}/data/renamed")
    alice.get_file_client("data/renamed").delete_file()
    assert [p.name for p in admin_fs.get_paths(recursive=True)] == ["data", "data/secret"]


def test_sticky_directory_keeps_children_to_their_owners(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    shared = admin_fs.create_directory("shared")
    shared.set_access_control(permissions="rwxrwxrwt")
    alice = _as(server, cert, ALICE).get_file_system_client(admin_fs.file_system_name)
    bob = _as(server, cert, BOB).get_file_system_client(admin_fs.file_system_name)
    alice.create_file("shared/hers")
    assert _status(lambda: bob.get_file_client("shared/hers").delete_file()) == 403
    alice.get_file_client("shared/hers").delete_file()


def test_group_entries_apply_to_members(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    admin_fs.get_directory_client("data").set_access_control(
        acl=f"user::rwx,group::---,other::---,group:{TEAM}:r-x"
    )
    member = _as(server, cert, BOB, [TEAM]).get_file_system_client(admin_fs.file_system_name)
    outsider = _as(server, cert, BOB).get_file_system_client(admin_fs.file_system_name)
    assert [p.name for p in member.get_paths(path="data")] == ["data/secret"]
    assert _status(lambda: list(outsider.get_paths(path="data"))) == 403


def test_shared_key_is_a_superuser(admin_fs: FileSystemClient) -> None:
    admin_fs._get_root_directory_client().set_access_control(permissions="---------")
    assert admin_fs.get_file_client("data/secret").download_file().readall() == b"classified"


def test_access_checks_async(server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient) -> None:
    async def scenario() -> None:
        async with AsyncDataLakeServiceClient(
            _url(server),
            AsyncStaticTokenCredential(_token(ALICE)),
            connection_verify=str(cert.cert),
            retry_total=0,
        ) as service:
            fs = service.get_file_system_client(admin_fs.file_system_name)
            with pytest.raises(HttpResponseError) as raised:
                await (await fs.get_file_client("data/secret").download_file()).readall()
            assert raised.value.status_code == 403
            assert raised.value.error_code == "AuthorizationPermissionMismatch"

    asyncio.run(scenario())


def _tree(admin_fs: FileSystemClient) -> None:
    """``work/team`` (Alice: ``rwx`` on both) holding ``open`` (hers too) and ``locked``
    (``rwx------``, $superuser's) each with a file, and an empty ``bare`` (``rwx------``)."""
    hers = f"user::rwx,group::---,other::---,user:{ALICE}:rwx"
    for name in ("work", "work/team", "work/team/open"):
        admin_fs.create_directory(name).set_access_control(acl=hers)
    for name in ("work/team/locked", "work/team/bare"):
        admin_fs.create_directory(name).set_access_control(permissions="rwx------")
    admin_fs.create_file("work/team/open/f")
    admin_fs.create_file("work/team/locked/f")


def test_a_recursive_listing_needs_read_and_execute_on_every_directory_it_descends_into(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    _tree(admin_fs)
    alice = _as(server, cert, ALICE).get_file_system_client(admin_fs.file_system_name)
    with pytest.raises(HttpResponseError) as raised:
        list(alice.get_paths(path="work/team", recursive=True))
    assert (raised.value.status_code, raised.value.error_code) == (403, "AuthorizationPermissionMismatch")
    assert [p.name for p in alice.get_paths(path="work/team", recursive=False)] == [
        "work/team/bare", "work/team/locked", "work/team/open",
    ]  # fmt: skip
    assert [p.name for p in alice.get_paths(path="work/team/open")] == ["work/team/open/f"]
    admin_fs.get_directory_client("work/team/locked").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{ALICE}:r-x"
    )
    assert [p.name for p in alice.get_paths(path="work", recursive=True)] == [
        "work/team", "work/team/bare", "work/team/locked", "work/team/locked/f",
        "work/team/open", "work/team/open/f",
    ]  # fmt: skip
    # one page at a time, each checked
    pages = alice.get_paths(path="work", recursive=True, max_results=2).by_page()
    assert sum(len(list(page)) for page in pages) == 6


def test_a_recursive_delete_needs_write_on_every_directory_it_empties(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    _tree(admin_fs)
    alice = _as(server, cert, ALICE).get_file_system_client(admin_fs.file_system_name)
    with pytest.raises(HttpResponseError) as raised:
        alice.get_directory_client("work/team").delete_directory()
    assert (raised.value.status_code, raised.value.error_code) == (403, "AuthorizationPermissionMismatch")
    assert len(list(admin_fs.get_paths(path="work", recursive=True))) == 6  # nothing went
    admin_fs.get_directory_client("work/team/locked").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{ALICE}:r-x"
    )
    with pytest.raises(HttpResponseError) as raised:  # read alone does not empty it
        alice.get_directory_client("work/team").delete_directory()
    assert raised.value.status_code == 403
    admin_fs.get_directory_client("work/team/locked").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{ALICE}:rwx"
    )
    alice.get_directory_client("work/team").delete_directory()  # the empty `bare` needs nothing
    assert [p.name for p in admin_fs.get_paths(recursive=True)] == ["data", "data/secret", "work"]


def test_recursive_checks_async(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    _tree(admin_fs)

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient(
            _url(server),
            AsyncStaticTokenCredential(_token(ALICE)),
            connection_verify=str(cert.cert),
            retry_total=0,
        ) as service:
            fs = service.get_file_system_client(admin_fs.file_system_name)
            with pytest.raises(HttpResponseError) as raised:
                [p async for p in fs.get_paths(path="work/team", recursive=True)]
            assert raised.value.error_code == "AuthorizationPermissionMismatch"
            with pytest.raises(HttpResponseError) as raised:
                await fs.get_directory_client("work/team").delete_directory()
            assert raised.value.error_code == "AuthorizationPermissionMismatch"

    asyncio.run(scenario())
