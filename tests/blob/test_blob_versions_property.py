"""A property test of versioning with soft delete against Azure's visible state: random
sequences of writes, deletes, version deletes, undeletes, promotions, retention changes and the
passing of days (``tests/blob_model.py`` draws them and is the oracle) are applied to the model
and to a real server with ``--blob-versioning`` and a ``DeleteRetentionPolicy``; after every
step List Blobs ``include=versions,deleted`` and the reads must show exactly what the model
shows. Days pass on the server through its test-only retention clock file."""

from __future__ import annotations

import hashlib
import itertools
import os
from base64 import b64encode
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import HttpResponseError
from azure.storage.blob import BlobServiceClient, ContainerClient, RetentionPolicy
from hypothesis import HealthCheck, Phase, given, note, settings

from tests.blob_model import BlobModel, ModelError, Op, apply, operations, pick_version
from tests.serverproc import ServerProcess

_names = itertools.count()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, Path]]:
    tmp = tmp_path_factory.mktemp("vprop")
    clock = tmp / "clock"
    clock.write_text("0")
    # One worker: a retention change then applies to the very next delete (workers re-read the
    # policy at most once a second, as Azure itself applies it with a delay).
    process = ServerProcess(tmp / "data", extra_args=["--blob-versioning", "--workers", "1"])
    process.env = {**os.environ, "TABULAE_TEST_CLOCK_FILE": str(clock), "TABULAE_TEST_PURGE_SECONDS": "3600"}
    process.start()
    yield process, clock
    process.stop()


class Real:
    """The server side of one example: a container, the clock, and model ids to real ids."""

    def __init__(self, service: BlobServiceClient, clock: Path) -> None:
        self.service = service
        self.container: ContainerClient = service.create_container(f"prop{next(_names)}")
        self.clock = clock
        # (blob, model version id) -> server version id: ids are unique per blob, as in Azure
        self.ids: dict[tuple[str, str], str] = {}

    def advance(self, seconds: float) -> None:
        self.clock.write_text(repr(float(self.clock.read_text()) + seconds))

    def run(self, model: BlobModel, op: Op, vid: str | None) -> Any:
        blob = self.container.get_blob_client(op.name)
        try:
            if op.kind == "write":
                return blob.upload_blob(op.content, overwrite=True)["version_id"]
            if op.kind == "delete":
                return blob.delete_blob()
            if op.kind == "delete_version":
                return blob.delete_blob(version_id=self.ids[op.name, vid or ""])
            if op.kind == "undelete":
                return blob.undelete_blob()
            if op.kind == "promote":
                return blob.start_copy_from_url(f"{blob.url}?versionid={self.ids[op.name, vid or '']}")[
                    "version_id"
                ]
            if op.kind == "set_retention":
                policy = RetentionPolicy(enabled=True, days=op.days)
                return self.service.set_service_properties(delete_retention_policy=policy)
            if op.kind == "advance":
                return self.advance(op.seconds)
        except HttpResponseError as error:
            return error
        raise AssertionError(op.kind)

    def listing(self) -> list[tuple[str, str, str, bool, bool, int | None]]:
        back = {(name, real): mine for (name, mine), real in self.ids.items()}
        out = []
        for blob in self.container.list_blobs(include=["versions", "deleted"]):
            md5 = blob.content_settings.content_md5
            out.append(
                (
                    blob.name,
                    back.get((blob.name, blob.version_id), f"unknown {blob.version_id}"),
                    b64encode(bytes(md5)).decode() if md5 else "",
                    bool(blob.is_current_version),
                    bool(blob.deleted),
                    blob.remaining_retention_days,
                )
            )
        return out


def _md5(content: bytes) -> str:
    return b64encode(hashlib.md5(content).digest()).decode()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(ops=operations(max_size=25))
def test_versions_and_soft_delete_keep_azures_visible_state(
    server: tuple[ServerProcess, Path], ops: list[Op]
) -> None:
    process, clock = server
    with BlobServiceClient.from_connection_string(process.connection_string) as service:
        service.set_service_properties(delete_retention_policy=RetentionPolicy(enabled=True, days=7))
        model = BlobModel(retention_days=7)
        real = Real(service, clock)
        for op in ops:
            note(repr(op))
            vid = pick_version(model, op, previous_only=op.kind == "delete_version")
            if op.kind in ("delete_version", "promote") and vid is None:
                continue
            expected = apply(model, op)
            got = real.run(model, op, vid)
            if isinstance(expected, ModelError):
                assert isinstance(got, HttpResponseError), (op, got)
                assert got.status_code == expected.status, (op, got.error_code)
                # A promotion from a missing version: Copy Blob's own code for a missing source.
                codes = {expected.code, "CannotVerifyCopySource"} if op.kind == "promote" else {expected.code}
                assert got.error_code in codes, (op, got.error_code)
                continue
            assert not isinstance(got, HttpResponseError), (op, got.error_code)
            if op.kind in ("write", "promote"):
                real.ids[op.name, expected] = got
            want = [
                (e.name, e.version_id, _md5(e.content), e.is_current, e.deleted, e.remaining_days)
                for e in model.listing()
            ]
            assert real.listing() == want, op
            for name in {op.name}:
                blob = real.container.get_blob_client(name)
                try:
                    current = model.read(name)
                except ModelError:
                    assert not blob.exists()
                else:
                    assert blob.download_blob().readall() == current
