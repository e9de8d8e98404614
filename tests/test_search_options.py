def test_the_default_workers_are_the_cpus_this_process_may_use(monkeypatch):
    import os

    from mirage_xdsl.search.options import SearchOptions, usable_cpus

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 2, 5})
    assert usable_cpus() == 3
    assert SearchOptions(jobs=0).workers() == 3
    assert SearchOptions(jobs=7).workers() == 7
