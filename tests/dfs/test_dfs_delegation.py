"""What Microsoft's Data Lake tests found missing (issue 33), through ``azure-storage-file-datalake``
(sync and aio) over HTTPS with ``--oauth basic`` on every store: a file system made with a token
is its creator's; a directory SAS (``sr=d``, ``sdd``) serves its directory and nothing beside
it; a user delegation SAS with ``suoid`` is held to that user's ACLs, and Set Access Control
Recursive counts the paths it may not change as failed entries; an append may be sent again at
the offset where it began, and in any order."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.filedatalake import (
    DataLakeDirectoryClient,
    DataLakeFileClient,
    DataLakeServiceClient,
    DirectorySasPermissions,
    FileSystemClient,
    generate_directory_sas,
)
from azure.storage.filedatalake.aio import DataLakeServiceClient as AsyncDataLakeServiceClient

from tests.dfs.conftest import DATA_CONTRIBUTOR, DATA_READER
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import (
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    make_jwt,
)

ALICE = "00000000-0000-0000-0000-00000000a11c"
AGENT = "5d56d308-df82-4266-ba63-ef1da3945873"


@pytest.fixture
def server(oauth_hns_server: ServerProcess) -> ServerProcess:
    return oauth_hns_server


def _url(server: ServerProcess) -> str:
    return f"https://127.0.0.1:{server.blob_port}/{DEV_ACCOUNT}"


def _as(server: ServerProcess, cert: SelfSignedCert, oid: str) -> DataLakeServiceClient:
    credential = StaticTokenCredential(make_jwt(extra={"oid": oid}))
    return DataLakeServiceClient(_url(server), credential, connection_verify=str(cert.cert), retry_total=0)


@pytest.fixture
def admin_fs(server: ServerProcess, cert: SelfSignedCert) -> Iterator[FileSystemClient]:
    admin = DataLakeServiceClient(
        _url(server), {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}, connection_verify=str(cert.cert)
    )
    fs = admin.create_file_system("sas" + uuid.uuid4().hex[:10])
    yield fs
    fs.delete_file_system()


def _error(call) -> tuple[int, str | None]:  # type: ignore[no-untyped-def]
    with pytest.raises(HttpResponseError) as raised:
        call()
    return int(raised.value.status_code or 0), raised.value.error_code


def test_a_file_system_made_with_a_token_is_its_creators(server: ServerProcess, cert: SelfSignedCert) -> None:
    creator = _as(server, cert, DATA_CONTRIBUTOR)  # creating a container needs a role
    fs = creator.create_file_system("mine" + uuid.uuid4().hex[:10])
    root = fs._get_root_directory_client().get_access_control()
    assert (root["owner"], root["group"], root["permissions"]) == (
        DATA_CONTRIBUTOR,
        DATA_CONTRIBUTOR,
        "rwxr-x---",
    )
    fs.create_file("dir/f.txt").upload_data(b"hers", overwrite=True)
    assert fs.get_file_client("dir/f.txt").download_file().readall() == b"hers"
    assert fs.get_file_client("dir/f.txt").get_access_control()["owner"] == DATA_CONTRIBUTOR
    other = _as(server, cert, "00000000-0000-0000-0000-000000000b0b").get_file_system_client(
        fs.file_system_name
    )
    assert _error(lambda: other.create_file("intruder.txt"))[0] == 403
    fs.delete_file_system()

    async def scenario() -> None:
        credential = AsyncStaticTokenCredential(make_jwt(extra={"oid": DATA_CONTRIBUTOR}))
        async with AsyncDataLakeServiceClient(
            _url(server), credential, connection_verify=str(cert.cert), retry_total=0
        ) as service:
            afs = await service.create_file_system("amine" + uuid.uuid4().hex[:10])
            await afs.create_file("a.txt")
            control = await afs.get_file_client("a.txt").get_access_control()
            assert control["owner"] == DATA_CONTRIBUTOR
            await afs.delete_file_system()

    asyncio.run(scenario())


def _directory_sas(fs: FileSystemClient, directory: str, permission: str, key=DEV_KEY) -> str:  # type: ignore[no-untyped-def]
    return generate_directory_sas(
        DEV_ACCOUNT, fs.file_system_name, directory, key, permission=permission,
        expiry=datetime.now(UTC) + timedelta(hours=1),
    )  # fmt: skip


def test_directory_sas_serves_its_directory_only(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    admin_fs.create_directory("a/b")
    admin_fs.create_directory("a/bb")
    admin_fs.create_file("a/b/f.txt").upload_data(b"inside", overwrite=True)
    admin_fs.create_file("a/bb/g.txt").upload_data(b"beside", overwrite=True)
    token = _directory_sas(
        admin_fs, "a/b", DirectorySasPermissions(read=True, create=True, write=True, list=True)
    )
    verify = str(cert.cert)
    directory = DataLakeDirectoryClient(
        _url(server), admin_fs.file_system_name, "a/b", token, connection_verify=verify
    )
    assert directory.get_access_control()["owner"] == "$superuser"
    inside = DataLakeFileClient(
        _url(server), admin_fs.file_system_name, "a/b/f.txt", token, connection_verify=verify
    )
    assert inside.download_file().readall() == b"inside"
    new = DataLakeFileClient(
        _url(server), admin_fs.file_system_name, "a/b/c/new.txt", token, connection_verify=verify
    )
    new.upload_data(b"made", overwrite=True)
    assert admin_fs.get_file_client("a/b/c/new.txt").download_file().readall() == b"made"
    listed = FileSystemClient(_url(server), admin_fs.file_system_name, token, connection_verify=verify)
    assert sorted(path.name for path in listed.get_paths(path="a/b")) == [
        "a/b/c",
        "a/b/c/new.txt",
        "a/b/f.txt",
    ]
    # a sibling whose name starts alike, and the parent: the signature does not fit them
    for path in ("a/bb/g.txt", "a"):
        beside = DataLakeFileClient(
            _url(server), admin_fs.file_system_name, path, token, connection_verify=verify
        )
        assert _error(lambda: beside.download_file().readall()) == (403, "AuthenticationFailed")  # noqa: B023
    # only what the token grants
    reader = _directory_sas(admin_fs, "a/b", DirectorySasPermissions(read=True))
    readonly = DataLakeFileClient(
        _url(server), admin_fs.file_system_name, "a/b/x.txt", reader, connection_verify=verify
    )
    assert _error(lambda: readonly.create_file()) == (403, "AuthorizationPermissionMismatch")


def test_directory_sas_with_a_bad_depth_is_refused(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    admin_fs.create_file("a/f.txt")
    token = _directory_sas(admin_fs, "a", "r")
    for depth in ("5", "x"):
        bad = token.replace("sdd=1", f"sdd={depth}")
        client = DataLakeFileClient(
            _url(server), admin_fs.file_system_name, "a/f.txt", bad, connection_verify=str(cert.cert)
        )
        assert _error(lambda: client.get_file_properties())[0] == 403  # noqa: B023


def _agent_tree(admin_fs: FileSystemClient) -> None:
    """``dir`` and all below it the agent's, but ``dir/file3`` and ``dir/sub3``."""
    admin_fs._get_root_directory_client().set_access_control(acl="user::--x,group::--x,other::--x")
    admin_fs.create_directory("dir", owner=AGENT)
    for name in ("dir/sub1", "dir/sub2"):
        admin_fs.create_directory(name, owner=AGENT, permissions="0777")
    for name in ("dir/sub1/file1", "dir/sub2/file2"):
        admin_fs.create_file(name, owner=AGENT, permissions="0777")
    admin_fs.create_file("dir/file3")
    admin_fs.create_directory("dir/sub3")


def _delegation_sas(server: ServerProcess, cert: SelfSignedCert, fs: FileSystemClient) -> str:
    start, expiry = datetime.now(UTC) - timedelta(minutes=5), datetime.now(UTC) + timedelta(hours=1)
    key = _as(server, cert, DATA_READER).get_user_delegation_key(start, expiry)  # a reader may
    return generate_directory_sas(
        DEV_ACCOUNT,
        fs.file_system_name,
        "dir",
        key,
        permission="racwdlmeop",
        expiry=expiry,
        agent_object_id=AGENT,
    )


def test_suoid_sas_changes_only_the_agents_paths(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    _agent_tree(admin_fs)
    token = _delegation_sas(server, cert, admin_fs)
    directory = DataLakeDirectoryClient(
        _url(server), admin_fs.file_system_name, "dir", token, connection_verify=str(cert.cert)
    )
    acl = "user::rwx,group::r-x,other::rwx"
    stopped = directory.set_access_control_recursive(acl=acl, batch_size=2)
    assert stopped.counters.failure_count == 1  # stops at dir/file3
    summary = directory.set_access_control_recursive(acl=acl, batch_size=2, continue_on_failure=True)
    assert (summary.counters.failure_count, summary.counters.directories_successful) == (2, 3)
    assert summary.counters.files_successful == 2
    assert admin_fs.get_file_client("dir/sub1/file1").get_access_control()["acl"] == acl
    assert admin_fs.get_file_client("dir/file3").get_access_control()["acl"] != acl
    # the agent's ACLs also decide plain access: dir/file3 is rw-r----- and not the agent's
    file3 = DataLakeFileClient(
        _url(server), admin_fs.file_system_name, "dir/file3", token, connection_verify=str(cert.cert)
    )
    assert _error(lambda: file3.download_file().readall()) == (403, "AuthorizationPermissionMismatch")
    made = DataLakeFileClient(
        _url(server), admin_fs.file_system_name, "dir/sub1/made.txt", token, connection_verify=str(cert.cert)
    )
    made.create_file()
    assert admin_fs.get_file_client("dir/sub1/made.txt").get_access_control()["owner"] == AGENT


def test_suoid_sas_async(server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient) -> None:
    _agent_tree(admin_fs)
    token = _delegation_sas(server, cert, admin_fs)

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient(
            _url(server), token, connection_verify=str(cert.cert)
        ) as service:
            directory = service.get_directory_client(admin_fs.file_system_name, "dir")
            summary = await directory.update_access_control_recursive(
                acl="user:" + ALICE + ":r-x", batch_size=2, continue_on_failure=True
            )
            assert summary.counters.failure_count == 2

    asyncio.run(scenario())


def test_appends_in_any_order_flush_checks_the_run(admin_fs: FileSystemClient) -> None:
    file = admin_fs.create_file("log.txt")
    file.append_data(b"!", 11, 1)  # before the data it follows: parallel uploads do this
    file.append_data(b"Hello world", 0, 11)
    file.append_data(b"Hello again", 0, 11)  # the uncommitted data at 0, sent anew
    file.append_data(b"?", 14, 1)  # past a gap: taken, and left out by the flush to 12
    file.flush_data(12)
    assert file.download_file().readall() == b"Hello again!"
    file.append_data(b"Hello world", 0, 11)  # over what is flushed: taken, never committed
    file.flush_data(12)
    assert file.download_file().readall() == b"Hello again!"
    file.append_data(b"x", 12, 1)
    file.append_data(b"z", 14, 1)
    assert _error(lambda: file.flush_data(15)) == (400, "InvalidFlushPosition")  # nothing at 13
    file.append_data(b"y", 13, 1)
    file.flush_data(15)
    assert file.download_file().readall() == b"Hello again!xyz"


def test_encryption_context_is_kept_with_the_file(
    server: ServerProcess, cert: SelfSignedCert, admin_fs: FileSystemClient
) -> None:
    file = admin_fs.get_file_client("ctx.txt")
    file.create_file(encryption_context="encryptionContext")
    assert file.get_file_properties()["encryption_context"] == "encryptionContext"
    file.upload_data(b"data", overwrite=True, encryption_context="other")
    download = file.download_file()
    assert download.readall() == b"data"
    assert download.properties["encryption_context"] == "other"
    listed = {path.name: path.encryption_context for path in admin_fs.get_paths()}
    assert listed == {"ctx.txt": "other"}
    plain = admin_fs.create_file("plain.txt")
    assert plain.get_file_properties()["encryption_context"] is None

    async def scenario() -> None:
        async with AsyncDataLakeServiceClient(
            _url(server),
            {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
            connection_verify=str(cert.cert),
        ) as service:
            afile = service.get_file_client(admin_fs.file_system_name, "actx.txt")
            await afile.create_file(encryption_context="async")
            assert (await afile.get_file_properties())["encryption_context"] == "async"

    asyncio.run(scenario())
