"""Generated protobuf module of the Chakra execution-trace schema (``proto/stratasim/chakra/et_def.proto``);
regenerate with ``proto/generate.py``. Reading and writing ``.et`` files lives in :mod:`workload_layer.chakra`."""
