"""The documentation: the site builds and its examples run."""
