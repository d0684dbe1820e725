"""Premium page blob accounts (``--premium-page-blobs ACCOUNT``, or ``premium-page-blobs = true``
in the account's ``[account-features]``): what a user of Azure's Premium_LRS account sees, on
each store, through the SDK (sync and aio) and raw HTTP for the answers the SDK hides.

Get Account Information says Premium_LRS; page blobs have a tier P4..P80, named on Put Blob, Set
Blob Tier and Copy Blob or else inferred from the size (P10 for a small blob, as recorded); the
tier cannot be smaller than the blob, cannot go below one set explicitly, and a blob whose tier
was set cannot grow past it; block blobs are refused. A standard account beside it is unchanged.
"""

from __future__ import annotations

import asyncio
import base64
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, BlobType, ContainerClient, PremiumPageBlobTier
from azure.storage.blob.aio import BlobServiceClient as AsyncBlobServiceClient

from tests.backends import backend_names
from tests.blobhttp import BlobHttp
from tests.conftest import fresh_store
from tests.consoleclient import ConsoleClient
from tests.serverproc import DEV_ACCOUNT, DEV_KEY, ServerProcess, free_port

STANDARD, STANDARD_KEY = "standardacct", base64.b64encode(b"standard-key-standard-key-32b!!!").decode()
GIB = 1024**3


@pytest.fixture(scope="module", params=backend_names())
def premium(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    """The development account as a premium page blob account, a standard account beside it."""
    extra = ["--account", f"{DEV_ACCOUNT}:{DEV_KEY}", "--account", f"{STANDARD}:{STANDARD_KEY}"]
    extra += ["--premium-page-blobs", DEV_ACCOUNT, *fresh_store(request.param)]
    process = ServerProcess(tmp_path_factory.mktemp("premium"), extra_args=extra, backend=request.param)
    process.start()
    yield process
    process.stop()


@pytest.fixture
def service(premium: ServerProcess) -> Iterator[BlobServiceClient]:
    credential = {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}
    with BlobServiceClient(premium.blob_endpoint, credential=credential) as client:
        yield client


@pytest.fixture
def container(service: BlobServiceClient, request: pytest.FixtureRequest) -> Iterator[ContainerClient]:
    name = "prem" + str(abs(hash(request.node.name)))[:12]
    client = service.create_container(name)
    yield client
    client.delete_container()


def _code(error: pytest.ExceptionInfo[HttpResponseError]) -> tuple[int | None, str | None]:
    return error.value.status_code, error.value.error_code


def test_account_information_says_premium_and_the_standard_account_stays_standard(
    premium: ServerProcess, service: BlobServiceClient
) -> None:
    info = service.get_account_information()
    assert (info["sku_name"], info["account_kind"], info["is_hns_enabled"]) == (
        "Premium_LRS",
        "StorageV2",
        False,
    )
    standard_url = f"http://127.0.0.1:{premium.blob_port}/{STANDARD}"
    credential = {"account_name": STANDARD, "account_key": STANDARD_KEY}
    with BlobServiceClient(standard_url, credential=credential) as standard:
        assert standard.get_account_information()["sku_name"] == "Standard_LRS"
        box = standard.create_container("standardbox")
        try:
            with pytest.raises(HttpResponseError) as raised:  # no premium tiers there, as before
                box.get_blob_client("p").create_page_blob(
                    1024, premium_page_blob_tier=PremiumPageBlobTier.P10
                )
            assert _code(raised) == (400, "AccessTierNotSupportedForBlobType")
            box.upload_blob("block", b"data")  # and block blobs as ever
        finally:
            box.delete_container()


def test_tiers_on_create_inferred_set_listed_and_copied(container: ContainerClient) -> None:
    named = container.get_blob_client("named")
    named.create_page_blob(1024, premium_page_blob_tier=PremiumPageBlobTier.P4)
    props = named.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred) == ("P4", None)
    uploaded = container.get_blob_client("uploaded")
    uploaded.upload_blob(
        bytes(1024), blob_type=BlobType.PageBlob, premium_page_blob_tier=PremiumPageBlobTier.P6
    )
    assert uploaded.get_blob_properties().blob_tier == "P6"

    small = container.get_blob_client("small")
    small.create_page_blob(1024)
    props = small.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred) == ("P10", True)
    large = container.get_blob_client("large")
    large.create_page_blob(200 * GIB)  # past P10's 128 GiB: the next tier up
    assert large.get_blob_properties().blob_tier == "P15"
    listed = {blob.name: (blob.blob_tier, blob.blob_tier_inferred) for blob in container.list_blobs()}
    assert listed == {
        "large": ("P15", True),
        "named": ("P4", None),
        "small": ("P10", True),
        "uploaded": ("P6", None),
    }

    small.set_premium_page_blob_tier(PremiumPageBlobTier.P50)
    props = small.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred) == ("P50", None)
    assert props.blob_tier_change_time is None
    assert {blob.name: blob.blob_tier for blob in container.list_blobs()}["small"] == "P50"

    copy = container.get_blob_client("copy")
    assert (
        copy.start_copy_from_url(named.url, premium_page_blob_tier=PremiumPageBlobTier.P30)["copy_status"]
        == "success"
    )
    assert copy.get_blob_properties().blob_tier == "P30"
    # A blob batch of Set Blob Tier sub-requests, each answered as the request alone.
    answers = container.set_premium_page_blob_tier_blobs(
        PremiumPageBlobTier.P40, "named", "uploaded", raise_on_any_failure=False
    )
    assert [answer.status_code for answer in answers] == [200, 200]
    answers = list(
        container.set_premium_page_blob_tier_blobs(
            PremiumPageBlobTier.P30, "named", raise_on_any_failure=False
        )
    )
    assert [(answer.status_code, answer.headers["x-ms-error-code"]) for answer in answers] == [
        (409, "CannotChangeToLowerTier")
    ]
    assert named.get_blob_properties().blob_tier == "P40"
    plain = container.get_blob_client("plain")
    plain.start_copy_from_url(large.url)  # no tier named: the copy's is inferred from its size
    props = plain.get_blob_properties()
    assert (props.blob_tier, props.blob_tier_inferred) == ("P15", True)


def test_what_azure_refuses(container: ContainerClient) -> None:
    blob = container.get_blob_client("disk")
    blob.create_page_blob(100 * GIB)
    with pytest.raises(HttpResponseError) as raised:  # P6 holds 64 GiB
        blob.set_premium_page_blob_tier(PremiumPageBlobTier.P6)
    assert _code(raised) == (409, "BlobTierInadequateForContentLength")
    with pytest.raises(HttpResponseError) as raised:
        container.get_blob_client("new").create_page_blob(
            100 * GIB, premium_page_blob_tier=PremiumPageBlobTier.P6
        )
    assert _code(raised) == (409, "BlobTierInadequateForContentLength")
    with pytest.raises(HttpResponseError) as raised:
        container.get_blob_client("copied").start_copy_from_url(
            blob.url, premium_page_blob_tier=PremiumPageBlobTier.P4
        )
    assert _code(raised) == (409, "BlobTierInadequateForContentLength")

    blob.set_premium_page_blob_tier(PremiumPageBlobTier.P20)
    blob.set_premium_page_blob_tier(PremiumPageBlobTier.P20)  # the same tier again
    with pytest.raises(HttpResponseError) as raised:
        blob.set_premium_page_blob_tier(PremiumPageBlobTier.P15)  # below one set explicitly
    assert _code(raised) == (409, "CannotChangeToLowerTier")
    assert blob.get_blob_properties().blob_tier == "P20"
    with pytest.raises(HttpResponseError) as raised:
        blob.resize_blob(600 * GIB)  # P20 holds 512 GiB
    assert _code(raised) == (409, "ContentLengthLargerThanTierLimit")
    blob.resize_blob(512 * GIB)

    inferred = container.get_blob_client("grows")
    inferred.create_page_blob(1024)
    inferred.resize_blob(300 * GIB)  # an inferred tier follows the size
    assert inferred.get_blob_properties().blob_tier == "P20"

    with pytest.raises(HttpResponseError) as raised:
        container.upload_blob("block", b"data")
    assert _code(raised) == (400, "BlobTypeNotSupported")
    assert "Block blobs are not supported." in str(raised.value)


def test_premium_tiers_aio(premium: ServerProcess, container: ContainerClient) -> None:
    async def run() -> None:
        credential = {"account_name": DEV_ACCOUNT, "account_key": DEV_KEY}
        async with AsyncBlobServiceClient(premium.blob_endpoint, credential=credential) as client:
            assert (await client.get_account_information())["sku_name"] == "Premium_LRS"
            box = client.get_container_client(container.container_name)
            blob = box.get_blob_client("aio")
            await blob.create_page_blob(2048)
            props = await blob.get_blob_properties()
            assert (props.blob_tier, props.blob_tier_inferred) == ("P10", True)
            await blob.set_premium_page_blob_tier(PremiumPageBlobTier.P40)
            assert [(b.blob_tier, b.blob_tier_inferred) async for b in box.list_blobs()] == [("P40", None)]
            with pytest.raises(HttpResponseError) as raised:
                await blob.set_premium_page_blob_tier(PremiumPageBlobTier.P30)
            assert _code(raised) == (409, "CannotChangeToLowerTier")
            copy = box.get_blob_client("aiocopy")
            await copy.start_copy_from_url(blob.url, premium_page_blob_tier=PremiumPageBlobTier.P60)
            assert (await copy.get_blob_properties()).blob_tier == "P60"
            with pytest.raises(HttpResponseError) as raised:
                await box.upload_blob("block", b"data")
            assert _code(raised) == (400, "BlobTypeNotSupported")

    asyncio.run(run())


def test_raw_answers(premium: ServerProcess, container: ContainerClient) -> None:
    http = BlobHttp(premium.blob_port)
    path = f"/{container.container_name}/raw"
    page = {"x-ms-blob-type": "PageBlob", "x-ms-blob-content-length": "512"}
    reply = http.request("PUT", path, {**page, "x-ms-access-tier": "Hot"})
    assert (reply.status, reply.code) == (400, "InvalidBlobTier")
    assert reply.error_fields()["Message"].startswith("The specified blob tier is invalid.\n")
    reply = http.request(
        "PUT", path, {**page, "x-ms-blob-content-length": str(33 * GIB), "x-ms-access-tier": "p4"}
    )
    assert (reply.status, reply.code) == (409, "BlobTierInadequateForContentLength")
    assert reply.error_fields()["Message"].startswith(
        "Specified blob tier size limit cannot be less than content length.\n"
    )
    assert http.request("PUT", path, page).status == 201

    head = http.request("HEAD", path)
    assert (head.headers["x-ms-access-tier"], head.headers["x-ms-access-tier-inferred"]) == ("P10", "true")
    assert "x-ms-access-tier-change-time" not in head.headers
    listing = http.request("GET", f"/{container.container_name}?restype=container&comp=list").body.decode()
    assert (
        "<BlobType>PageBlob</BlobType><AccessTier>P10</AccessTier>"
        "<AccessTierInferred>true</AccessTierInferred><LeaseStatus>"
    ) in listing

    assert http.request("PUT", path + "?comp=tier", {"x-ms-access-tier": "P6"}).status == 200
    head = http.request("HEAD", path)
    assert head.headers["x-ms-access-tier"] == "P6" and "x-ms-access-tier-inferred" not in head.headers
    reply = http.request("PUT", path + "?comp=tier", {"x-ms-access-tier": "P4"})
    assert (reply.status, reply.code) == (409, "CannotChangeToLowerTier")
    assert reply.error_fields()["Message"].startswith("A higher blob tier has already been explicitly set.\n")
    reply = http.request("PUT", path + "?comp=tier", {"x-ms-access-tier": "Cool"})
    assert (reply.status, reply.code) == (400, "InvalidBlobTier")
    source = http.base + path
    reply = http.request("PUT", path + "copy", {"x-ms-copy-source": source, "x-ms-access-tier": "Cool"})
    assert (reply.status, reply.code) == (400, "InvalidBlobTier")
    reply = http.request("PUT", path + "copy", {"x-ms-copy-source": source, "x-ms-access-tier": "P4"})
    assert reply.status == 202
    assert http.request("HEAD", path + "copy").headers["x-ms-access-tier"] == "P4"
    reply = http.request("PUT", path + "?comp=properties", {"x-ms-blob-content-length": str(65 * GIB)})
    assert (reply.status, reply.code) == (409, "ContentLengthLargerThanTierLimit")
    reply = http.request(
        "PUT", f"/{container.container_name}/block", {"x-ms-blob-type": "BlockBlob"}, b"data"
    )
    assert (reply.status, reply.code) == (400, "BlobTypeNotSupported")


def test_the_config_file_makes_an_account_premium(tmp_path: Path) -> None:
    config = tmp_path / "tabulae.toml"
    config.write_text(f"[account-features.{DEV_ACCOUNT}]\npremium-page-blobs = true\n")
    server = ServerProcess(tmp_path / "data", extra_args=["--config", str(config)]).start()
    try:
        with BlobServiceClient.from_connection_string(server.connection_string) as client:
            assert client.get_account_information()["sku_name"] == "Premium_LRS"
    finally:
        server.stop()


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--premium-page-blobs", "nosuch"], "account features for nosuch, which the server does not serve"),
        (
            ["--premium-page-blobs", DEV_ACCOUNT, "--hns", DEV_ACCOUNT],
            "premium-page-blobs: a premium page blob account holds page blobs only",
        ),
    ],
)
def test_serve_refuses_a_premium_account_it_cannot_make(tmp_path: Path, flags: list[str], said: str) -> None:
    ports = [str(free_port()) for _ in range(3)]
    command = [sys.executable, "-m", "tabulae", "serve", "--data-dir", str(tmp_path), "--port", ports[0]]
    command += ["--queue-port", ports[1], "--blob-port", ports[2], *flags]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.startswith("tabulae: InvalidArguments: ") and said in result.stderr


def test_the_console_shows_premium_tiers(premium: ServerProcess, container: ContainerClient) -> None:
    container.get_blob_client("inferred").create_page_blob(1024)
    container.get_blob_client("named").create_page_blob(1024, premium_page_blob_tier=PremiumPageBlobTier.P30)
    console = ConsoleClient(premium.port)
    assert console.sign_in(DEV_ACCOUNT, DEV_KEY).status == 303
    page = console.get(f"/blobs/{container.container_name}")
    assert page.status == 200
    assert "P10 (inferred)" in page.text and ">P30<" in page.text
