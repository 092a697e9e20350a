"""Small classic models trained data-parallel: an MLP, ResNet-50 and DLRM, built from hyperparameters."""
