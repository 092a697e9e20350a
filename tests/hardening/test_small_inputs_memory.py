"""A study of under 1 KB cannot take ``stratasim run`` past 1 GB (issue 15, "Must show"): one instance of each class
that used to explode — NPUs, splits, repeats, layers, micro-batches, flit-level packets, an anchor bomb, nesting,
numbers beyond the wire — is run in a child limited to 1 GiB of address space (imports included): each ends in one
clear error (exit 2), never a MemoryError, a traceback or a kill."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import stratasim_process

_NET = "network: {topology: [{kind: ring, size: 8, bandwidth: 50GB/s, latency: 500ns}]}\n"
_ALL_REDUCE = "workload: {kind: collective, collective: all_reduce, size: 64MiB}\n"
_GPT = (
    "workload:\n  kind: transformer\n  model: {layers: 96, hidden: 12288, heads: 96, seq_len: 2048, vocab: 51200}\n"
    "  parallelism: {tp: 8, pp: 1, dp: 1, micro_batch: 1, global_batch: 8}\ncompute: {device: h100}\n"
)
_BOMB = "".join(f"  a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n" for i in range(1, 10))

SMALL_STUDIES = {
    "a billion NPUs": _ALL_REDUCE + "network: {topology: [{kind: ring, size: 1073741823, bandwidth: 50GB/s, "
    "latency: 500ns}]}\n",
    "splits of 10^12": _ALL_REDUCE + _NET + "system: {splits: 1000000000000}\n",
    "a repeat of 10^9": _ALL_REDUCE.replace("64MiB}", "64MiB, repeat: 1000000000}") + _NET,
    "a million layers": _GPT.replace("layers: 96", "layers: 1000000") + _NET,
    "10^12 micro-batches": _GPT.replace("global_batch: 8", "global_batch: 1000000000000") + _NET,
    "flit-level packets of 1 PiB": _ALL_REDUCE.replace("64MiB", "1PiB")
    + _NET.replace("{topology", "{backend: flit_level, topology"),
    "an anchor bomb in a section": _NET + "workload:\n  kind: collective\n  a0: &a0 lol\n" + _BOMB,
    "deep nesting": _NET + "workload: " + "[" * 400 + "]" * 400 + "\n",
    "a size of 10^30 bytes": _ALL_REDUCE.replace("64MiB", "1e30B") + _NET,
    "a bandwidth of 10^-30 B/s": _ALL_REDUCE + _NET.replace("50GB/s", "1e-30B/s"),
}


@pytest.mark.parametrize("text", SMALL_STUDIES.values(), ids=SMALL_STUDIES.keys())
def test_a_small_study_stays_under_1_gib(tmp_path: Path, text: str) -> None:
    assert len(text.encode()) < 1024
    study = tmp_path / "small.yaml"
    study.write_text(text, encoding="utf-8")
    done = stratasim_process("run", str(study), "--quiet", timeout=120, address_space=2**30)
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert done.stderr.startswith("error: ") and "Traceback" not in done.stderr and "MemoryError" not in done.stderr
