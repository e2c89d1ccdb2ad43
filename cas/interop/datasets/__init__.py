"""Datasets from the tools teams already use, and back (docs/importers.md, "Datasets from
other tools"): a LangSmith, Langfuse, Phoenix or Braintrust export, a Hugging Face dataset
(saved to disk, or Parquet) or plain JSON Lines, imported as the cases of a `direct` dataset
in one sealed version; `cas export --to <tool>` writes a version in the shape the tool uploads.

- `items`: an example as every reader yields it, and the case it becomes (and back).
- `mapping`: column mappings for tables (which column is the input, the output...).
- `langsmith`, `langfuse`, `phoenix`, `braintrust`: each tool's export read, and its upload
  shape written.
- `hf`, `jsonl`: a Hugging Face dataset or Parquet file; plain JSON Lines.
- `importing`: the import into a repository (all or nothing; unchanged when nothing is new).
"""

from cas.interop.datasets.importing import (TOOLS, DatasetImport, import_dataset, prepared,
                                            read_items)

__all__ = ["TOOLS", "DatasetImport", "import_dataset", "prepared", "read_items"]
