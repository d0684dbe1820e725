"""The Blob service: containers, block and append blobs, leases and snapshots."""
