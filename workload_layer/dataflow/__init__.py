"""Workloads as dataflow graphs, as DFModel describes them: kernels, the tensors between them, and the ways each
kernel can be sharded over a group of devices."""
