"""The data volume's figures on ``/metrics``: free space, the reserve, and whether it is low or
full (``storage.volume`` keeps them; each worker looks at the volume every second)."""

from __future__ import annotations

from typing import Any

from tabulae.insight.exposition import escape_label_value


def volume_prometheus(volume: dict[str, Any]) -> str:
    """Prometheus text for a volume's snapshot; sizes only where the store has a volume of its
    own to measure (not PostgreSQL's)."""
    label = f'{{path="{escape_label_value(volume["path"])}"}}' if volume["path"] else ""
    lines: list[str] = []

    def gauge(name: str, help_text: str, value: object) -> None:
        lines.append(f"# HELP {name} {help_text}\n# TYPE {name} gauge\n{name}{label} {value}\n")

    if volume["free_bytes"] is not None:
        gauge("tabulae_volume_free_bytes", "Free space on the data volume.", volume["free_bytes"])
        gauge("tabulae_volume_size_bytes", "Size of the data volume.", volume["total_bytes"])
        gauge(
            "tabulae_volume_reserve_bytes",
            "Space held in reserve on the data volume, released when it fills so deletes can run.",
            volume["reserve_bytes"],
        )
        gauge(
            "tabulae_volume_low",
            "1 while the data volume has less free space than --disk-warn.",
            int(volume["low"]),
        )
    gauge(
        "tabulae_volume_full",
        "1 while the data volume is full: writes are refused (503 ServerBusy), reads and deletes run.",
        int(volume["full"]),
    )
    return "".join(lines)
