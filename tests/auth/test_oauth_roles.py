"""Azure data roles held by bearer tokens on a flat account, on every service, once any
``--oauth-role`` is configured: a real ``tabulae serve --oauth basic --oauth-role ...`` on every
store, driven by ``azure-storage-blob``, ``azure-storage-queue`` and ``azure-data-tables`` (sync
and aio). Each operation needs the actions of "Permissions for calling data operations", which a
token holds through the roles of "Azure built-in roles for Storage" assigned to its ``oid`` or
its groups; without them, 403 ``AuthorizationPermissionMismatch``, as Azure answers."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from azure.core.credentials import AzureNamedKeyCredential
from azure.core.exceptions import HttpResponseError
from azure.data.tables import TableServiceClient, TableTransactionError, UpdateMode
from azure.storage.blob import AccessPolicy, BlobServiceClient, ContainerClient, ContainerSasPermissions
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient
from azure.storage.queue import QueueServiceClient
from azure.storage.queue.aio import QueueServiceClient as AsyncQueueServiceClient

from tests.backends import backend_names
from tests.conftest import fresh_store
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess
from tests.tls import (
    AsyncStaticTokenCredential,
    SelfSignedCert,
    StaticTokenCredential,
    https_request,
    make_jwt,
)

OWNER = "00000000-0000-0000-0000-00000000f001"
CONTRIBUTOR = "00000000-0000-0000-0000-00000000f002"
READER = "00000000-0000-0000-0000-00000000f003"
READERS = "00000000-0000-0000-0000-00000000f0ff"  # a group with the reader role
QUEUE_CONTRIBUTOR = "00000000-0000-0000-0000-00000000f101"
QUEUE_READER = "00000000-0000-0000-0000-00000000f102"
QUEUE_PROCESSOR = "00000000-0000-0000-0000-00000000f103"
QUEUE_SENDER = "00000000-0000-0000-0000-00000000f104"
TABLE_CONTRIBUTOR = "00000000-0000-0000-0000-00000000f201"
TABLE_READER = "00000000-0000-0000-0000-00000000f202"
ACCOUNT_CONTRIBUTOR = "00000000-0000-0000-0000-00000000f301"
ADMIN = "00000000-0000-0000-0000-00000000f302"  # a data owner and an account contributor
NOBODY = "00000000-0000-0000-0000-00000000f404"  # valid tokens, no assignment
ROLES = [
    f"{OWNER}=owner",
    f"{CONTRIBUTOR}=Storage Blob Data Contributor",  # Azure's name of the role
    f"{READER}=reader",
    f"{READERS}=reader",
    f"{QUEUE_CONTRIBUTOR}=queue-contributor",
    f"{QUEUE_READER}=queue-reader",
    f"{QUEUE_PROCESSOR}=queue-processor",
    f"{QUEUE_SENDER}=queue-sender",
    f"{TABLE_CONTRIBUTOR}=table-contributor",
    f"{TABLE_READER}=table-reader",
    f"{ACCOUNT_CONTRIBUTOR}=Storage Account Contributor",
    f"{ADMIN}=owner",
    f"{ADMIN}=account-contributor",
]
DENIED = (403, "AuthorizationPermissionMismatch")


@pytest.fixture(scope="module", params=backend_names())
def roles_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, cert: SelfSignedCert
) -> Iterator[ServerProcess]:
    """A flat development account over HTTPS, bearer tokens on, and the roles above."""
    args = [*fresh_store(request.param), "--cert", str(cert.cert), "--key", str(cert.key)]
    args += ["--oauth", "basic", "--workers", "1"]
    for spec in ROLES:
        args += ["--oauth-role", spec]
    process = ServerProcess(tmp_path_factory.mktemp("roles"), extra_args=args, backend=request.param).start()
    yield process
    process.stop()


def _token(oid: str, groups: list[str] | None = None) -> StaticTokenCredential:
    return StaticTokenCredential(make_jwt(extra={"oid": oid, "groups": groups or []}))


def _url(server: ServerProcess, port: int) -> str:
    return f"https://127.0.0.1:{port}/{DEV_ACCOUNT}"


def _refused(call: Callable[[], Any]) -> tuple[int, str | None]:
    with pytest.raises(HttpResponseError) as raised:
        call()
    error = raised.value  # the Tables SDK names the code in the response only
    return int(error.status_code or 0), getattr(error, "error_code", None) or error.response.headers.get(
        "x-ms-error-code"
    )


@pytest.fixture
def blobs(roles_server: ServerProcess, cert: SelfSignedCert) -> Callable[..., BlobServiceClient]:
    def client(oid: str, groups: list[str] | None = None) -> BlobServiceClient:
        return BlobServiceClient(
            _url(roles_server, roles_server.blob_port), _token(oid, groups),
            connection_verify=str(cert.cert), retry_total=0,
        )  # fmt: skip

    return client


@pytest.fixture
def container(roles_server: ServerProcess, cert: SelfSignedCert) -> Iterator[ContainerClient]:
    """A container with one blob ``a.txt``, made with the account key."""
    admin = BlobServiceClient(
        _url(roles_server, roles_server.blob_port),
        {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY},
        connection_verify=str(cert.cert),
    )
    made = admin.create_container("roles" + uuid.uuid4().hex[:10])
    made.upload_blob("a.txt", b"alpha")
    yield made
    made.delete_container()


# ------------------------------------------------------------------------------ Blob


def test_a_token_without_an_assignment_is_refused_everything(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    nobody = blobs(NOBODY)
    mine = nobody.get_container_client(container.container_name)
    assert _refused(lambda: list(nobody.list_containers())) == DENIED
    assert _refused(lambda: mine.get_blob_client("a.txt").download_blob().readall()) == DENIED
    assert _refused(lambda: mine.upload_blob("b.txt", b"x")) == DENIED
    assert _refused(lambda: nobody.create_container("no" + uuid.uuid4().hex[:10])) == DENIED
    assert _refused(lambda: mine.get_blob_client("a.txt").get_blob_properties()) == DENIED  # HEAD
    assert [b.name for b in container.list_blobs()] == ["a.txt"]


def _reads_but_never_writes(reader: BlobServiceClient, container: ContainerClient) -> None:
    mine = reader.get_container_client(container.container_name)
    assert container.container_name in [c.name for c in reader.list_containers()]
    assert [b.name for b in mine.list_blobs()] == ["a.txt"]
    assert mine.get_blob_client("a.txt").download_blob().readall() == b"alpha"
    assert mine.get_container_properties().name == container.container_name
    now = datetime.now(UTC)
    assert reader.get_user_delegation_key(now, now + timedelta(hours=1)).signed_oid is not None
    blob = mine.get_blob_client("a.txt")
    assert _refused(lambda: mine.upload_blob("b.txt", b"x")) == DENIED
    assert _refused(lambda: blob.set_blob_metadata({"k": "v"})) == DENIED
    assert _refused(lambda: blob.delete_blob()) == DENIED
    assert _refused(lambda: mine.set_container_metadata({"k": "v"})) == DENIED
    assert _refused(lambda: mine.get_container_access_policy()) == DENIED
    assert _refused(lambda: blob.get_blob_tags()) == DENIED
    assert _refused(lambda: mine.delete_blobs("a.txt", raise_on_any_failure=True)) == DENIED


def test_a_reader_reads_and_lists_and_writes_nothing(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    _reads_but_never_writes(blobs(READER), container)
    _reads_but_never_writes(blobs(NOBODY, [READERS]), container)  # the role of its group
    assert container.get_blob_client("a.txt").download_blob().readall() == b"alpha"


def test_a_contributor_reads_writes_and_deletes_but_not_acls_tags_or_the_service(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    contributor = blobs(CONTRIBUTOR)
    made = contributor.create_container("made" + uuid.uuid4().hex[:10])
    made.upload_blob("x.txt", b"x")
    made.set_container_metadata({"k": "v"})
    mine = contributor.get_container_client(container.container_name)
    mine.upload_blob("b.txt", b"beta")
    mine.get_blob_client("b.txt").set_blob_metadata({"k": "v"})
    mine.get_blob_client("b.txt").create_snapshot()
    mine.delete_blobs("b.txt", delete_snapshots="include")  # a batch: parent and sub-request
    assert [b.name for b in mine.list_blobs()] == ["a.txt"]
    a = mine.get_blob_client("a.txt")
    assert _refused(lambda: mine.set_container_access_policy({}, public_access=None)) == DENIED
    assert _refused(lambda: mine.get_container_access_policy()) == DENIED
    assert _refused(lambda: a.set_blob_tags({"t": "1"})) == DENIED
    assert _refused(lambda: list(contributor.find_blobs_by_tags("t = '1'"))) == DENIED
    assert _refused(lambda: contributor.get_service_properties()) == DENIED
    assert _refused(lambda: contributor.get_account_information()) == DENIED
    made.delete_container()


def test_an_owner_also_sets_acls_and_tags_but_not_the_services_properties(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    owner = blobs(OWNER)
    mine = owner.get_container_client(container.container_name)
    policy = AccessPolicy(ContainerSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1))
    mine.set_container_access_policy({"p1": policy})
    assert [i.id for i in mine.get_container_access_policy()["signed_identifiers"]] == ["p1"]
    blob = mine.get_blob_client("a.txt")
    blob.set_blob_tags({"t": "1"})
    assert blob.get_blob_tags() == {"t": "1"}
    assert "a.txt" in [b.name for b in mine.find_blobs_by_tags("t = '1'")]
    mine.upload_blob("o.txt", b"o")
    mine.delete_blob("o.txt")
    # the service's own properties need a management role ("Storage Account Contributor")
    assert _refused(lambda: owner.get_service_properties()) == DENIED
    assert _refused(lambda: owner.set_service_properties(cors=[])) == DENIED


def test_an_account_contributor_manages_the_service_and_containers_but_reads_no_data(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    manager = blobs(ACCOUNT_CONTRIBUTOR)
    manager.set_service_properties(cors=[])
    assert manager.get_service_properties()["cors"] == []
    assert manager.get_account_information()["account_kind"]
    made = manager.create_container("managed" + uuid.uuid4().hex[:8])
    policy = AccessPolicy(ContainerSasPermissions(read=True), expiry=datetime.now(UTC) + timedelta(hours=1))
    made.set_container_access_policy({"p1": policy})
    assert _refused(lambda: made.upload_blob("x", b"x")) == DENIED  # no DataAction
    own = manager.get_container_client(container.container_name)
    assert _refused(lambda: own.download_blob("a.txt").readall()) == DENIED
    made.delete_container()
    # both roles add up, as Azure's assignments do
    admin = blobs(ADMIN)
    admin.get_service_properties()
    assert admin.get_container_client(container.container_name).download_blob("a.txt").readall() == b"alpha"


def test_blob_roles_async(
    roles_server: ServerProcess, cert: SelfSignedCert, container: ContainerClient
) -> None:
    async def scenario() -> None:
        for oid, may_write in ((READER, False), (CONTRIBUTOR, True)):
            credential = AsyncStaticTokenCredential(make_jwt(extra={"oid": oid}))
            async with AsyncBlobServiceClient(
                _url(roles_server, roles_server.blob_port), credential,
                connection_verify=str(cert.cert), retry_total=0,
            ) as service:  # fmt: skip
                mine = service.get_container_client(container.container_name)
                assert await (await mine.download_blob("a.txt")).readall() == b"alpha"
                if may_write:
                    await mine.upload_blob("async.txt", b"a", overwrite=True)
                    await mine.delete_blob("async.txt")
                else:
                    with pytest.raises(HttpResponseError) as raised:
                        await mine.upload_blob("async.txt", b"a")
                    assert (raised.value.status_code, raised.value.error_code) == DENIED

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ Queue


@pytest.fixture
def queues(roles_server: ServerProcess, cert: SelfSignedCert) -> Callable[[str], QueueServiceClient]:
    def client(oid: str) -> QueueServiceClient:
        return QueueServiceClient(
            _url(roles_server, roles_server.queue_port), _token(oid),
            connection_verify=str(cert.cert), retry_total=0,
        )  # fmt: skip

    return client


def test_queue_roles_split_sending_processing_and_reading(
    queues: Callable[[str], QueueServiceClient],
) -> None:
    name = "q" + uuid.uuid4().hex[:12]
    contributor = queues(QUEUE_CONTRIBUTOR).get_queue_client(name)
    contributor.create_queue(metadata={"k": "v"})
    contributor.send_message("from the contributor")
    sender = queues(QUEUE_SENDER).get_queue_client(name)
    sender.send_message("from the sender")
    assert _refused(lambda: sender.peek_messages()) == DENIED
    assert _refused(lambda: sender.receive_message()) == DENIED
    assert _refused(lambda: sender.get_queue_properties()) == DENIED
    reader = queues(QUEUE_READER).get_queue_client(name)
    assert [m.content for m in reader.peek_messages(max_messages=5)] == [
        "from the contributor",
        "from the sender",
    ]
    assert reader.get_queue_properties().metadata == {"k": "v"}
    assert name in [q.name for q in queues(QUEUE_READER).list_queues()]
    assert _refused(lambda: reader.receive_message()) == DENIED
    assert _refused(lambda: reader.send_message("no")) == DENIED
    processor = queues(QUEUE_PROCESSOR).get_queue_client(name)
    taken = processor.receive_message()
    assert taken is not None and taken.content == "from the contributor"
    processor.delete_message(taken)
    assert _refused(lambda: processor.send_message("no")) == DENIED
    assert _refused(lambda: processor.clear_messages()) == DENIED
    assert _refused(lambda: processor.set_queue_metadata({"k": "w"})) == DENIED
    assert _refused(lambda: contributor.get_queue_access_policy()) == DENIED  # no data role has it
    for oid in (NOBODY, OWNER):  # a Blob role is no Queue role
        assert _refused(lambda oid=oid: queues(oid).get_queue_client(name).peek_messages()) == DENIED
    contributor.clear_messages()
    contributor.delete_queue()


def test_queue_roles_async(roles_server: ServerProcess, cert: SelfSignedCert) -> None:
    name = "aq" + uuid.uuid4().hex[:12]

    async def scenario() -> None:
        async def client(oid: str) -> AsyncQueueServiceClient:
            return AsyncQueueServiceClient(
                _url(roles_server, roles_server.queue_port),
                AsyncStaticTokenCredential(make_jwt(extra={"oid": oid})),
                connection_verify=str(cert.cert), retry_total=0,
            )  # fmt: skip

        async with await client(QUEUE_CONTRIBUTOR) as contributor, await client(QUEUE_SENDER) as sender:
            await contributor.create_queue(name)
            await sender.get_queue_client(name).send_message("hello")
            with pytest.raises(HttpResponseError) as raised:
                await sender.get_queue_client(name).receive_message()
            assert (raised.value.status_code, raised.value.error_code) == DENIED
            await contributor.delete_queue(name)

    asyncio.run(scenario())


# ------------------------------------------------------------------------------ Table


@pytest.fixture
def tables(roles_server: ServerProcess, cert: SelfSignedCert) -> Callable[[str], TableServiceClient]:
    def client(oid: str) -> TableServiceClient:
        return TableServiceClient(
            endpoint=_url(roles_server, roles_server.port), credential=_token(oid),
            connection_verify=str(cert.cert), retry_total=0,
        )  # fmt: skip

    return client


def test_table_roles_read_or_write_entities_each_operation_of_a_batch_checked(
    tables: Callable[[str], TableServiceClient], roles_server: ServerProcess, cert: SelfSignedCert
) -> None:
    name = "t" + uuid.uuid4().hex[:12]
    contributor = tables(TABLE_CONTRIBUTOR).create_table(name)
    contributor.create_entity({"PartitionKey": "p", "RowKey": "1", "V": 1})
    contributor.upsert_entity({"PartitionKey": "p", "RowKey": "2", "V": 2}, mode=UpdateMode.MERGE)
    contributor.submit_transaction([("upsert", {"PartitionKey": "p", "RowKey": "3", "V": 3})])
    reader = tables(TABLE_READER).get_table_client(name)
    assert [e["V"] for e in reader.query_entities("PartitionKey eq 'p'")] == [1, 2, 3]
    assert reader.get_entity("p", "1")["V"] == 1
    assert name in [t.name for t in tables(TABLE_READER).query_tables(f"TableName eq '{name}'")]
    assert _refused(lambda: reader.create_entity({"PartitionKey": "p", "RowKey": "9"})) == DENIED
    assert _refused(lambda: reader.delete_entity("p", "1")) == DENIED
    with pytest.raises(TableTransactionError) as raised:
        reader.submit_transaction([("create", {"PartitionKey": "p", "RowKey": "8"})])
    assert (raised.value.status_code, raised.value.error_code) == DENIED
    assert _refused(lambda: tables(TABLE_READER).create_table("x" + uuid.uuid4().hex[:12])) == DENIED
    assert _refused(lambda: contributor.get_table_access_policy()) == DENIED  # no data role has it
    for oid in (NOBODY, OWNER):  # a Blob role is no Table role
        assert _refused(lambda oid=oid: list(tables(oid).get_table_client(name).list_entities())) == DENIED
    keyed = TableServiceClient(
        endpoint=_url(roles_server, roles_server.port),
        credential=AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
        connection_verify=str(cert.cert),
    )
    assert [e["RowKey"] for e in keyed.get_table_client(name).list_entities()] == ["1", "2", "3"]
    tables(TABLE_CONTRIBUTOR).delete_table(name)


def test_a_copy_sources_token_needs_a_role_that_reads_it(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    """Put Blob From URL with ``x-ms-copy-source-authorization``: the source's token is held to
    its roles as a Get Blob with it would be; refused, the copy answers the source's 403 as
    CannotVerifyCopySource."""
    mine = blobs(CONTRIBUTOR).get_container_client(container.container_name)
    source = container.get_blob_client("a.txt").url
    copied = mine.get_blob_client("copied.txt")
    copied.upload_blob_from_url(source, source_authorization="Bearer " + make_jwt(extra={"oid": READER}))
    assert copied.download_blob().readall() == b"alpha"
    with pytest.raises(HttpResponseError) as raised:
        copied.upload_blob_from_url(
            source, overwrite=True, source_authorization="Bearer " + make_jwt(extra={"oid": QUEUE_READER})
        )
    error = raised.value
    assert (error.status_code, error.error_code) == (403, "CannotVerifyCopySource")
    assert error.response.headers["x-ms-copy-source-error-code"] == "AuthorizationPermissionMismatch"


def test_a_token_reads_a_bare_source_of_its_own_account_as_itself(
    blobs: Callable[..., BlobServiceClient], container: ContainerClient
) -> None:
    """The From URL operations made with a token read a source of the same account given by its
    bare URL (no SAS, no source token) as that token, as Azure's recordings of the JS SDK's
    "appendBlockFromURL - destination bearer token" show; a key-signed request may not
    (tests/blob/test_blob_copies.py)."""
    mine = blobs(CONTRIBUTOR).get_container_client(container.container_name)
    source = container.get_blob_client("a.txt").url
    copied = mine.get_blob_client("bare-copy.txt")
    copied.upload_blob_from_url(source)
    assert copied.download_blob().readall() == b"alpha"
    log = mine.get_blob_client("bare-log.txt")
    log.create_append_blob()
    log.append_block_from_url(source)
    synced = mine.get_blob_client("bare-sync.txt").start_copy_from_url(source, requires_sync=True)
    assert synced["copy_status"] == "success"
    assert log.download_blob().readall() == b"alpha"
    with pytest.raises(HttpResponseError) as raised:  # held to its roles: a reader writes nothing
        blobs(READER).get_blob_client(container.container_name, "nope.txt").upload_blob_from_url(source)
    assert (raised.value.status_code, raised.value.error_code) == (403, "AuthorizationPermissionMismatch")


def test_refusals_are_written_as_each_service_writes_its_errors(
    roles_server: ServerProcess, cert: SelfSignedCert
) -> None:
    """Raw HTTP: the Table service's 403 in OData JSON, the Queue and Blob services' in XML, each
    with the code header, as Azure writes them."""
    headers = {
        "Authorization": "Bearer " + make_jwt(extra={"oid": NOBODY}),
        "x-ms-version": "2021-12-02",
        "Accept": "application/json;odata=minimalmetadata",
    }
    table = https_request(roles_server.port, cert, "GET", f"/{DEV_ACCOUNT}/Tables", headers)
    assert (table.status, table.header("x-ms-error-code")) == DENIED
    assert table.json()["odata.error"]["code"] == "AuthorizationPermissionMismatch"
    for port, target in (
        (roles_server.queue_port, f"/{DEV_ACCOUNT}?comp=list"),
        (roles_server.blob_port, f"/{DEV_ACCOUNT}?comp=list"),
    ):
        answer = https_request(port, cert, "GET", target, headers)
        assert (answer.status, answer.header("x-ms-error-code")) == DENIED
        assert b"<Code>AuthorizationPermissionMismatch</Code>" in answer.body
