"""nccl-tests' all-reduce and all-gather tables (8 B to 8 GiB, doubling) for one 8 x H100 NVSwitch node, from
``system.algorithm: nccl`` (examples/nccl/allreduce_8xh100.yaml); docs/how-to/nccl.md compares them with NVIDIA's.

    python examples/nccl/busbw.py
    python examples/nccl/busbw.py examples/nccl/allreduce_2x8xh100.yaml   # two nodes, one communicator
"""

import sys
from pathlib import Path

from stratasim.bench.nccl_busbw import busbw_rows, format_rows

STUDY = Path(__file__).with_name("allreduce_8xh100.yaml")

if __name__ == "__main__":
    sizes = [8 << k for k in range(31)]  # 8 B .. 8 GiB
    for collective in ("all_reduce", "all_gather"):
        print(format_rows(busbw_rows(sys.argv[1] if len(sys.argv) > 1 else STUDY, collective, sizes)))
        print()
