"""Serving LLM requests: arrivals, continuous batching, a paged KV cache, routing across replicas, metrics."""
