"""Azure data roles of bearer callers (``--oauth-role OID=owner|contributor|reader``) on an HNS
account, through ``azure-storage-file-datalake`` and ``azure-storage-blob`` (sync and aio) on
every store: a role is asked before the ACLs ("Access control model in Azure Data Lake
Storage"), and what it does not cover is left to the ACLs."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobClient, ContainerClient
from azure.storage.blob.aio import ContainerClient as AsyncContainerClient
from azure.storage.filedatalake import DataLakeServiceClient, FileSystemClient
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.dfs.conftest import DATA_CONTRIBUTOR, DATA_OWNER, DATA_READER, READERS_GROUP
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import AsyncStaticTokenCredential, SelfSignedCert, StaticTokenCredential, make_jwt

NOBODY = "00000000-0000-0000-0000-0000000d0404"


def _url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


def _token(oid: str, groups: list[str] | None = None) -> str:
    return make_jwt(extra={"oid": oid, "groups": groups or []})


@pytest.fixture
def admin_fs(oauth_hns_server: ServerProcess, cert: SelfSignedCert) -> Iterator[FileSystemClient]:
    """Made with the account key: the root ``rwxr-x---`` (nobody else may even traverse it),
    ``data`` ``rwx------`` holding ``data/secret`` ``rw-------``, all ``$superuser``'s."""
    admin = DataLakeServiceClient(
        _url(oauth_hns_server),
        {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        connection_verify=str(cert.cert),
    )
    fs = admin.create_file_system("role" + uuid.uuid4().hex[:10])
    fs.create_directory("data").set_access_control(permissions="rwx------")
    secret = fs.create_file("data/secret")
    secret.upload_data(b"classified", overwrite=True)
    secret.set_access_control(permissions="rw-------")
    yield fs
    fs.delete_file_system()


@pytest.fixture
def as_(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> Callable[..., FileSystemClient]:
    def client(oid: str, groups: list[str] | None = None) -> FileSystemClient:
        service = DataLakeServiceClient(
            _url(oauth_hns_server),
            StaticTokenCredential(_token(oid, groups)),
            connection_verify=str(cert.cert),
            retry_total=0,
        )
        return service.get_file_system_client(admin_fs.file_system_name)

    return client


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(HttpResponseError) as raised:
        call()
    assert raised.value.status_code == 403
    return str(raised.value.error_code)


def _blob(
    server: ServerProcess, cert: SelfSignedCert, fs: FileSystemClient, name: str, oid: str
) -> BlobClient:
    return BlobClient(
        _url(server), fs.file_system_name, name,
        credential=StaticTokenCredential(_token(oid)), connection_verify=str(cert.cert), retry_total=0,
    )  # fmt: skip


def test_without_a_role_the_acls_alone_decide(as_: Callable[..., FileSystemClient]) -> None:
    nobody = as_(NOBODY)
    assert _refused(lambda: nobody.get_file_client("data/secret").download_file().readall()) == (
        "AuthorizationPermissionMismatch"
    )


def test_a_data_owner_is_a_superuser_who_owns_what_it_makes(
    as_: Callable[..., FileSystemClient],
    oauth_hns_server: ServerProcess,
    cert: SelfSignedCert,
    admin_fs: FileSystemClient,
) -> None:
    owner = as_(DATA_OWNER)
    secret = owner.get_file_client("data/secret")
    assert secret.download_file().readall() == b"classified"
    secret.set_access_control(owner=NOBODY, permissions="rw-r-----")  # owner and ACL of anything
    assert secret.get_access_control()["owner"] == NOBODY
    made = owner.create_file("data/made")
    assert made.get_access_control()["owner"] == DATA_OWNER
    assert [p.name for p in owner.get_paths(recursive=True)] == ["data", "data/made", "data/secret"]
    blob = _blob(oauth_hns_server, cert, admin_fs, "data/blob", DATA_OWNER)
    blob.upload_blob(b"through the blob api")
    owner.get_directory_client("data").delete_directory()
    assert list(admin_fs.get_paths()) == []


def test_a_contributor_reads_writes_and_deletes_but_sets_acls_only_of_its_own(
    as_: Callable[..., FileSystemClient],
    oauth_hns_server: ServerProcess,
    cert: SelfSignedCert,
    admin_fs: FileSystemClient,
) -> None:
    contributor = as_(DATA_CONTRIBUTOR)
    secret = contributor.get_file_client("data/secret")
    assert secret.download_file().readall() == b"classified"
    assert _refused(lambda: secret.set_access_control(permissions="rw-rw-rw-")) == (
        "AuthorizationPermissionMismatch"
    )
    secret.append_data(b"+", offset=10, length=1, flush=True)
    assert secret.download_file().readall() == b"classified+"
    mine = contributor.create_file("data/mine")
    assert mine.get_access_control()["owner"] == DATA_CONTRIBUTOR
    mine.set_access_control(permissions="rw-r--r--")  # the owning user sets its ACL
    assert mine.get_access_control()["permissions"] == "rw-r--r--"
    assert _refused(lambda: mine.set_access_control(owner=NOBODY)) == "AuthorizationPermissionMismatch"
    mine.rename_file(f"{admin_fs.file_system_name}/data/renamed")
    blob = _blob(oauth_hns_server, cert, admin_fs, "data/secret", DATA_CONTRIBUTOR)
    blob.upload_blob(b"via blob", overwrite=True)
    contributor.get_file_client("data/renamed").delete_file()
    secret.delete_file()
    assert [p.name for p in admin_fs.get_paths(recursive=True)] == ["data"]


def test_a_reader_reads_and_lists_and_the_acls_decide_its_writes(
    as_: Callable[..., FileSystemClient],
    oauth_hns_server: ServerProcess,
    cert: SelfSignedCert,
    admin_fs: FileSystemClient,
) -> None:
    reader = as_(DATA_READER)
    assert reader.get_file_client("data/secret").download_file().readall() == b"classified"
    assert [p.name for p in reader.get_paths(recursive=True)] == ["data", "data/secret"]
    assert reader.get_file_client("data/secret").get_access_control()["permissions"] == "rw-------"
    blob = _blob(oauth_hns_server, cert, admin_fs, "data/secret", DATA_READER)
    assert blob.download_blob().readall() == b"classified"
    assert _refused(lambda: blob.upload_blob(b"x", overwrite=True)) == "AuthorizationPermissionMismatch"
    assert _refused(lambda: reader.create_file("data/new")) == "AuthorizationPermissionMismatch"
    assert _refused(lambda: reader.get_file_client("data/secret").delete_file()) == (
        "AuthorizationPermissionMismatch"
    )
    # what the role does not allow, an ACL may
    admin_fs._get_root_directory_client().set_access_control(
        acl=f"user::rwx,group::r-x,other::---,user:{DATA_READER}:--x"
    )
    admin_fs.get_directory_client("data").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{DATA_READER}:-wx"
    )
    assert reader.create_file("data/new").get_access_control()["owner"] == DATA_READER


def test_a_role_assigned_to_a_group_is_its_members(as_: Callable[..., FileSystemClient]) -> None:
    member = as_(NOBODY, [READERS_GROUP])
    assert member.get_file_client("data/secret").download_file().readall() == b"classified"
    assert _refused(lambda: member.create_file("data/new")) == "AuthorizationPermissionMismatch"
    assert _refused(lambda: as_(NOBODY).get_file_client("data/secret").download_file().readall())


def test_roles_async(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    async def read_as(oid: str) -> bytes:
        async with AsyncDataLakeServiceClient(
            _url(oauth_hns_server),
            AsyncStaticTokenCredential(_token(oid)),
            connection_verify=str(cert.cert),
            retry_total=0,
        ) as service:
            fs = service.get_file_system_client(admin_fs.file_system_name)
            return bytes(await (await fs.get_file_client("data/secret").download_file()).readall())

    async def scenario() -> None:
        assert await read_as(DATA_READER) == b"classified"
        assert await read_as(DATA_CONTRIBUTOR) == b"classified"
        with pytest.raises(HttpResponseError) as raised:
            await read_as(NOBODY)
        assert raised.value.error_code == "AuthorizationPermissionMismatch"

    asyncio.run(scenario())


def _container(
    server: ServerProcess, cert: SelfSignedCert, fs: FileSystemClient, oid: str
) -> ContainerClient:
    return ContainerClient(
        _url(server), fs.file_system_name,
        credential=StaticTokenCredential(_token(oid)), connection_verify=str(cert.cert), retry_total=0,
    )  # fmt: skip


def test_container_operations_of_an_hns_account_need_a_role(
    as_: Callable[..., FileSystemClient],
    oauth_hns_server: ServerProcess,
    cert: SelfSignedCert,
    admin_fs: FileSystemClient,
) -> None:
    """A container's own operations need the role's actions: no ACL grants them (Get and Set
    Container Properties and Metadata, its ACL, a file system's creation and deletion)."""

    def container(oid: str) -> ContainerClient:
        return _container(oauth_hns_server, cert, admin_fs, oid)

    assert _refused(lambda: container(NOBODY).get_container_properties()) == "AuthorizationPermissionMismatch"
    assert _refused(lambda: as_(NOBODY).get_file_system_properties()) == "AuthorizationPermissionMismatch"
    nobody = DataLakeServiceClient(
        _url(oauth_hns_server), StaticTokenCredential(_token(NOBODY)),
        connection_verify=str(cert.cert), retry_total=0,
    )  # fmt: skip
    assert _refused(lambda: nobody.create_file_system("no" + uuid.uuid4().hex[:10])) == (
        "AuthorizationPermissionMismatch"
    )
    assert _refused(lambda: nobody.delete_file_system(admin_fs.file_system_name)) == (
        "AuthorizationPermissionMismatch"
    )
    assert container(DATA_READER).get_container_properties().name == admin_fs.file_system_name
    assert _refused(lambda: container(DATA_READER).set_container_metadata({"k": "v"})) == (
        "AuthorizationPermissionMismatch"
    )
    container(DATA_CONTRIBUTOR).set_container_metadata({"k": "v"})
    assert admin_fs.get_file_system_properties().metadata == {"k": "v"}
    assert _refused(lambda: container(DATA_CONTRIBUTOR).get_container_access_policy()) == (
        "AuthorizationPermissionMismatch"
    )
    assert container(DATA_OWNER).get_container_access_policy()["signed_identifiers"] == []


def test_list_blobs_of_an_hns_account_needs_r_x_on_the_directory_it_lists(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    """Without a role, List Blobs is List Paths of the directory its prefix names: ``r-x`` on
    it, ``--x`` above, and for a listing without ``/`` as delimiter ``r-x`` on each directory
    whose children it shows; a role that reads lists without an ACL."""
    nobody = _container(oauth_hns_server, cert, admin_fs, NOBODY)
    assert _refused(lambda: [b.name for b in nobody.walk_blobs()]) == "AuthorizationPermissionMismatch"
    admin_fs._get_root_directory_client().set_access_control(
        acl=f"user::rwx,group::r-x,other::---,user:{NOBODY}:r-x"
    )
    assert sorted(b.name for b in nobody.walk_blobs()) == ["data", "data/"]  # the root, by "/"
    assert _refused(lambda: [b.name for b in nobody.walk_blobs(name_starts_with="data/")]) == (
        "AuthorizationPermissionMismatch"
    )
    assert _refused(lambda: [b.name for b in nobody.list_blobs()]) == "AuthorizationPermissionMismatch"
    admin_fs.get_directory_client("data").set_access_control(
        acl=f"user::rwx,group::---,other::---,user:{NOBODY}:r-x"
    )
    assert [b.name for b in nobody.walk_blobs(name_starts_with="data/")] == ["data/secret"]
    assert [b.name for b in nobody.list_blobs()] == ["data", "data/secret"]
    reader = _container(oauth_hns_server, cert, admin_fs, DATA_READER)
    assert [b.name for b in reader.list_blobs()] == ["data", "data/secret"]


def test_list_blobs_acls_async(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    async def names(oid: str) -> list[str]:
        async with AsyncContainerClient(
            _url(oauth_hns_server), admin_fs.file_system_name,
            credential=AsyncStaticTokenCredential(_token(oid)),
            connection_verify=str(cert.cert), retry_total=0,
        ) as container:  # fmt: skip
            return [blob.name async for blob in container.list_blobs()]

    async def scenario() -> None:
        assert await names(DATA_CONTRIBUTOR) == ["data", "data/secret"]
        with pytest.raises(HttpResponseError) as raised:
            await names(NOBODY)
        assert (raised.value.status_code, raised.value.error_code) == (403, "AuthorizationPermissionMismatch")

    asyncio.run(scenario())


def test_tags_of_an_hns_path_need_a_role_that_has_them(
    oauth_hns_server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    """Tags are no ACL's to grant, and only Storage Blob Data Owner holds their actions."""
    secret = _blob(oauth_hns_server, cert, admin_fs, "data/secret", DATA_CONTRIBUTOR)
    assert _refused(lambda: secret.set_blob_tags({"t": "1"})) == "AuthorizationPermissionMismatch"
    assert _refused(lambda: secret.get_blob_tags()) == "AuthorizationPermissionMismatch"
    owned = _blob(oauth_hns_server, cert, admin_fs, "data/secret", DATA_OWNER)
    owned.set_blob_tags({"t": "1"})
    assert owned.get_blob_tags() == {"t": "1"}
