"""Dataflow graphs of the workloads DFModel evaluates (Sec. VI.C): a GPT layer, DLRM, HPL and a 1-D FFT, each a
pure function of its sizes, with presets of the paper's sizes."""
