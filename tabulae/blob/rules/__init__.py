"""The Blob service's rules as pure functions: names, leases, conditions, checksums, limits and
block lists. The service applies them inside the store's transactions; nothing here does I/O."""
