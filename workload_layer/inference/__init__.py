"""Serving a batch of requests on a decoder transformer: prefill and decode under TP and PP, with a KV cache."""
