"""Decoder transformers trained under a Megatron-style TP/SP/PP/DP/EP plan: model, memory, schedule, graph."""
