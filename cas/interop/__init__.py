"""L4, interop: other formats in and out. It knows nothing of the evaluation loop.

- `importers/`: runs from the trace formats teams already have (pure: documents -> runs).
- `exports`: a pinned version out to JSON Lines, Parquet, Hugging Face, OpenAI fine-tuning.
"""
