"""The web console under ``/-/console/``: pages per service over the services, never the stores."""
