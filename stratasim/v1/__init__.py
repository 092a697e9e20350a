"""Generated protobuf modules of the StrataSim contracts (``proto/stratasim/v1``); regenerate with ``proto/generate.py``."""
