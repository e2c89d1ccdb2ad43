"""L4, interop: other formats in and out. It knows nothing of the evaluation loop.

- `importers/`: runs from the trace formats teams already have (pure: documents -> runs).
- `datasets/`: datasets from other tools' exports (LangSmith, Langfuse, Phoenix, Braintrust,
  Hugging Face, JSON Lines) as the cases of one version, and back in the shape each uploads.
- `exports`: a pinned version out to JSON Lines, Parquet, Hugging Face, OpenAI fine-tuning,
  and (through `datasets/`) to LangSmith, Langfuse, Phoenix and Braintrust.
- `lockfile`: `cas.lock`, a project's file of pins (TOML): read, written, checked, moved along
  renewals, and read at a git revision.
- `review_diff`: the cases two versions differ by (and a lock file's change) as markdown for
  a pull request comment.
"""
