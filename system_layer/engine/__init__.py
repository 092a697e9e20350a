"""The engine: graphs checked and planned, NPUs executing them, the coordinator windowing the network federate."""
