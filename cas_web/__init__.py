"""`cas serve`: a local review page over the Python API (docs/web.md)."""
