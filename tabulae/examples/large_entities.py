"""Large entities: keep a big value in a blob, and its name in the entity.

The problem: an entity holds at most 1 MiB in all. An employee's photo, a document or a long
history can be bigger, and then the service refuses the whole entity.

The design: upload the value to Blob storage and store the blob's name (or URL) in a property
of the entity. The entity stays small and fast to query; the value is read only when needed.

The trade-off: two operations to write and two to read, in two services, with no transaction
spanning them. Write the blob first and the entity second (a crash leaves at worst an
unreferenced blob, which a clean-up can find), or use a queue (``eventually-consistent``).
"""

from __future__ import annotations

from tabulae.examples.harness import Example, refused

TITLE = "Large entities: the value in a blob, its name in the entity"

_SIZE = 1_200_000  # bytes: over the 1 MiB an entity may hold


def run(ex: Example) -> None:
    table = ex.table("largeentities")
    photo = bytes(range(256)) * (_SIZE // 256)
    # A binary property holds at most 64 KiB, so the photo goes in as 20 properties of 60,000 bytes.
    chunks = {f"Photo{n:02d}": photo[n * 60_000 : (n + 1) * 60_000] for n in range(20)}
    with ex.operation(f"the {len(photo):,}-byte photo inside the entity: refused"):
        too_large = refused(
            lambda: table.create_entity({"PartitionKey": "Sales", "RowKey": "000123", **chunks}),
            400,
            "EntityTooLarge",
        )
    ex.claim(too_large, "an entity over 1 MiB is refused: 400 EntityTooLarge")
    photos = ex.container("photos")
    with ex.operation("upload the photo as a blob, then the entity naming it") as op:
        photos.upload_blob("Sales/000123.jpg", photo)
        table.create_entity({"PartitionKey": "Sales", "RowKey": "000123", "FirstName": "Ada",
                             "PhotoBlob": f"{photos.container_name}/Sales/000123.jpg"})  # fmt: skip
    ex.claim(op.requests == 2, "writing is two requests: the blob, then the entity")
    with ex.operation("read the entity (point), then its photo (blob)") as op:
        employee = table.get_entity("Sales", "000123")
        blob_name = employee["PhotoBlob"].split("/", 1)[1]
        content = photos.download_blob(blob_name).readall()
    ex.claim(content == photo, f"the {len(content):,} bytes come back whole from the blob")
    ex.claim(
        dict(op.classes) == {"point": 1} and op.requests == 2,
        "reading is a point query for the entity and one blob download",
    )
