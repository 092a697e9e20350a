"""Contract suites: every backend of a layer, in-process and through a real gRPC server."""
