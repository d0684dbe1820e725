"""The Blob service's account properties: what every service has (logging, metrics, CORS) plus
the Blob ones (delete retention, static website, default service version), and their stored
JSON form. They are stored and returned; only CORS changes how requests are answered."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import orjson

from tabulae.model.policies import (
    ServiceProperties,
    decode_service_properties,
    encode_service_properties,
)

# Get Blob Service Properties names AllowPermanentDelete in its DeleteRetentionPolicy from this
# x-ms-version. Azure answered it at 2020-02-10 (the JS SDK's nock recording of December 2020,
# <AllowPermanentDelete>false</AllowPermanentDelete>) and left it out at 2018-11-09 in April and
# May 2022, long after the element existed (the az CLI's own recordings test_logging_operations
# and test_metrics_operations, Azure/azure-cli src/azure-cli/azure/cli/command_modules/storage/
# tests/latest/recordings: <DeleteRetentionPolicy><Enabled>false</Enabled></DeleteRetentionPolicy>).
# In the same month Azure answered it to the CLI's Data Lake commands at 2020-10-02
# (test_adls_fs_soft_delete.yaml, April 2022: <AllowPermanentDelete>false</AllowPermanentDelete>),
# so the request's version decides. 2019-02-02 to 2019-12-12 are unrecorded since the element
# came and are taken as before it.
PERMANENT_DELETE_VERSION = "2020-02-10"


@dataclass(slots=True)
class DeleteRetention:
    enabled: bool = False
    days: int | None = None
    allow_permanent_delete: bool = False


@dataclass(slots=True)
class StaticWebsite:
    enabled: bool = False
    index_document: str | None = None
    error_document_404_path: str | None = None
    default_index_document_path: str | None = None


@dataclass(slots=True)
class BlobServiceProperties:
    common: ServiceProperties = field(default_factory=ServiceProperties)
    delete_retention: DeleteRetention = field(default_factory=DeleteRetention)
    static_website: StaticWebsite = field(default_factory=StaticWebsite)
    default_service_version: str | None = None


def encode(properties: BlobServiceProperties) -> bytes:
    return orjson.dumps(
        {
            "common": orjson.loads(encode_service_properties(properties.common)),
            "delete_retention": asdict(properties.delete_retention),
            "static_website": asdict(properties.static_website),
            "default_service_version": properties.default_service_version,
        }
    )


def decode(blob: bytes | None) -> BlobServiceProperties:
    if not blob:
        return BlobServiceProperties()
    data = orjson.loads(blob)
    return BlobServiceProperties(
        common=decode_service_properties(orjson.dumps(data["common"])),
        delete_retention=DeleteRetention(**data["delete_retention"]),
        static_website=StaticWebsite(**data["static_website"]),
        default_service_version=data["default_service_version"],
    )
