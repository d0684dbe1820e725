"""The Blob service's front-end: routes, operations, XML formats, SAS and handlers."""
