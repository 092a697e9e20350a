"""The measured operator-level model: GEMMs, fused and decode attention, element-wise and normalisation kernels on
H100 and H200, fitted once to profiles measured with PyTorch 2.11 (``data/``), and the ``measured`` compute
backend that prices with it."""
