"""examples/hf_llama.py: the decode example runs on CPU, and its KV-cache
write measurement times what transformers' StaticCache does per token."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

sys.path.insert(0, str(Path(__file__).parent.parent / "examples"))


@pytest.fixture
def mirage_logger():
    """The example's main() sets the level and a filter of the project's
    logger, as a script does: restored after, so later tests see every line."""
    import logging

    log = logging.getLogger("mirage_xdsl.torch")
    level, filters = log.level, list(log.filters)
    yield log
    log.setLevel(level)
    log.filters[:] = filters


def test_small_model_decodes_on_cpu(capsys, mirage_logger) -> None:
    import hf_llama

    argv = ["--small", "--methods", "eager", "--device", "cpu", "--steps", "4"]
    assert hf_llama.main(argv) == 0
    assert mirage_logger.filters  # what the fixture undoes
    assert "eager          generated 4 tokens" in capsys.readouterr().out


def test_the_qwen2_family_decodes_through_mirage_on_cpu(capsys, mirage_logger):
    import hf_llama

    argv = ["--small", "--family", "qwen2", "--device", "cpu", "--steps", "4"]
    assert hf_llama.main([*argv, "--methods", "eager,mirage"]) == 0
    lines = capsys.readouterr().out.splitlines()
    (mirage,) = [line for line in lines if line.startswith("mirage ")]
    assert mirage.endswith("same tokens as eager"), mirage


def test_cache_write_runs_each_layers_update_and_copies(monkeypatch) -> None:
    """Each timed call writes one token into every layer's K and V: the
    update at the next position, the copies at the middle of the cache."""
    import hf_llama

    calls: list[int] = []

    def replays(call, reps: int, warmup: int) -> tuple[float, bool]:
        for _ in range(reps + 8):  # as many runs as the CUDA-graph timer makes
            call()
        calls.append(reps + 8)
        return 1.0, True

    monkeypatch.setattr(hf_llama, "time_replays", replays)
    torch.manual_seed(0)
    model = hf_llama.LlamaForCausalLM(hf_llama.llama_config(True)).eval()
    seen: list[torch.Tensor] = []
    real = torch.Tensor.index_copy_

    def index_copy_(self, dim, index, source):
        seen.append(index.clone())
        return real(self, dim, index, source)

    monkeypatch.setattr(torch.Tensor, "index_copy_", index_copy_)
    write = hf_llama.cache_write_us(model, 64, reps=10)
    assert write == {"update": 1.0, "index_copy_": 1.0} and calls == [18, 18]
    layers = model.config.num_hidden_layers
    per_call = 2 * layers
    first, updates, copies = (
        seen[:per_call],
        seen[per_call : per_call * 19],
        seen[per_call * 19 :],
    )
    assert [int(i) for i in first] == [0] * per_call  # the cache allocated
    assert [int(i) for i in updates[::per_call]] == list(range(1, 19))
    assert len(copies) == 18 * per_call and {int(i) for i in copies} == {32}


def test_the_glue_line_counts_the_kernels_outside_the_parts() -> None:
    """The profile's line for mirage's step: the launches and device time of
    the kernels that are not a part's (Inductor's glue, torch's copies)."""
    import hf_llama

    from mirage_xdsl.runtime.kernel_profile import Kernel, Profile

    kernels = [
        Kernel("part_28b2f5df3906_k4_fma", 22, 168.0),
        Kernel("triton_poi_fused_2", 24, 31.5),
        Kernel("triton_poi_fused__foreach_add_5", 1, 1.5),
        Kernel("part_5b39056c3b51_k0", 1, 1.0),
    ]
    line = hf_llama.glue_line(Profile(kernels, []))
    assert (
        line
        == "  of which torch between µGraphs: 25 launches, 33.0 µs (16.3% of the kernel time)"
    )
