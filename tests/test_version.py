"""The search cache's key holds the version of the code (search/version.py):
a result found by other code is not served, a fixed bug is searched again."""

from __future__ import annotations

from mirage_xdsl.ir.builder import new_kernel_graph
from mirage_xdsl.search import cache
from mirage_xdsl.search.cache import search_key
from mirage_xdsl.search.options import SearchOptions
from mirage_xdsl.search.superoptimizer import superoptimize_function
from mirage_xdsl.search.version import code_version, source_hash
from mirage_xdsl.semantics.interpreter import entry_function


def test_another_version_gives_another_key() -> None:
    options = SearchOptions().key()
    assert search_key("p", options, version="a") == search_key("p", options, "", "a")
    assert search_key("p", options, version="a") != search_key(
        "p", options, version="b"
    )
    # without one given, the key holds this code's version
    assert search_key("p", options) == search_key("p", options, version=code_version())
    measured = search_key("p", options, "gpu:H100", code_version(True))
    assert search_key("p", options, "gpu:H100") == measured
    assert search_key("p", options, "gpu:H100", "a") != measured


def test_the_version_follows_the_source(tmp_path) -> None:
    package = tmp_path / "package"
    package.mkdir()
    (package / "a.py").write_text("x = 1\n")
    before = source_hash([package])
    assert source_hash([package]) == before
    (package / "a.py").write_text("x = 2\n")
    assert source_hash([package]) != before
    (package / "a.py").write_text("x = 1\n")
    (package / "b.py").write_text("")
    assert source_hash([package]) != before
    assert code_version() == code_version() != code_version(True)


def test_a_result_of_other_code_is_searched_again(tmp_path, monkeypatch) -> None:
    g = new_kernel_graph("f")
    g.mark_output(g.exp(g.new_input((16, 16))))
    fn = entry_function(g.module())
    options = SearchOptions(jobs=1, max_kernels=1, budget=60.0)

    def search():
        return superoptimize_function(fn.clone(), options, cache_dir=str(tmp_path))

    assert not search().report.cached
    assert search().report.cached
    monkeypatch.setattr(cache, "code_version", lambda measured=False: "fixed")
    assert not search().report.cached
    assert search().report.cached
