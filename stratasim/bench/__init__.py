"""``stratasim bench``: wall time, events/s and peak memory of collective studies and of whole study files."""
