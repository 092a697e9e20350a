"""Tests of the gRPC wire: clients, servicers, serve and spawn."""
