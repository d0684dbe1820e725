"""Data Lake Storage Gen2: the hierarchical namespace (DFS) API, served on the Blob port.

The modules here are the database-free parts: which requests are DFS ones and what they do
(``routing``), POSIX ACLs and permissions (``acl``), the JSON bodies and property headers
(``formats``) and the path rules (``paths``).
"""
