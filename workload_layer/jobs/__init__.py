"""Several jobs sharing one topology: their keys, their placement on its NPUs, and their graphs merged into one."""
