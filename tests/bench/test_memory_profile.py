"""The phase table of ``bench.memory_profile`` on hand-written probe events (no memory is measured here)."""

import pytest

from bench.memory_profile import STAMP_CLASSES, merge_phase_keys, phases, prepare_images, render

pytestmark = pytest.mark.pi


def _event(phase, peak_mib, seconds):
    return {"phase": phase, "peak_kib": peak_mib * 1024, "rss_kib": peak_mib * 1024 - 10, "seconds": seconds}


EVENTS = [_event("import", 40, 0.5), _event("open model", 60, 0.7), _event("call infer", 90, 1.0),
          _event("call infer", 91, 1.1), _event("call infer", 95, 1.3), _event("call set_head", 95, 1.4),
          _event("call infer", 96, 1.5), _event("exit", 96, 1.6)]


def test_consecutive_calls_become_a_first_call_and_the_rest():
    got = [(p["phase"], p["peak_kib"] // 1024, p["increase_kib"] // 1024, round(p["seconds"], 6)) for p in phases(EVENTS)]
    assert got == [("import", 40, 40, 0.5), ("open model", 60, 20, 0.2), ("infer: first call", 90, 30, 0.3),
                   ("infer (2 more calls)", 95, 5, 0.3), ("set_head: first call", 95, 0, 0.1),
                   ("infer", 96, 1, 0.1), ("exit", 96, 0, 0.1)]


def test_the_probe_keeps_two_events_of_a_run_of_calls(monkeypatch):
    import bench.memory_worker as memory_worker

    peaks = iter([10, 11, 12, 15, 15, 16])
    monkeypatch.setattr(memory_worker, "resident_kib", lambda: (next(peaks) * 1024, 0))
    probe = memory_worker.PhaseProbe()
    for phase in ("open model", "call step", "call step", "call step", "call step", "exit"):
        probe.mark(phase)
    assert [(e["phase"], e["peak_kib"] // 1024, e.get("calls", 1)) for e in probe.events] == [
        ("open model", 10, 1), ("call step", 11, 1), ("call step", 15, 3), ("exit", 16, 1)]
    assert [p["phase"] for p in phases(probe.events)] == ["open model", "step: first call", "step (3 more calls)", "exit"]


def test_one_more_call_is_singular():
    labels = [p["phase"] for p in phases([_event("call fisher", 10, 0.1), _event("call fisher", 11, 0.2)])]
    assert labels == ["fisher: first call", "fisher (1 more call)"]


def test_row_order_keeps_each_runs_order_and_places_missing_phases():
    keys = merge_phase_keys([["import", "open model", "get_state: first call", "infer: first call", "exit"],
                             ["import", "open model", "read images", "infer: first call", "infer", "exit"]])
    assert keys == [("import", 0), ("open model", 0), ("read images", 0), ("get_state: first call", 0),
                    ("infer: first call", 0), ("infer", 0), ("exit", 0)]
    assert merge_phase_keys([["a", "b", "a"]]) == [("a", 0), ("b", 0), ("a", 1)]


def _run(label, predict_peak, adapt_peak):
    env = {"interpreter_module": "m", "interpreter_version": "1", "numpy": "2", "python": "3"}
    command = {"events": EVENTS[:-1] + [_event("exit", predict_peak, 2.0)], "tensorflow_imported": False,
               "environment": env, "predict_seconds": 1.5}
    return {"label": label, "python": "py", "api": {**command, "infer_ms": 2.5},
            "predict": command, "adapt": {**command, "events": [_event("import", 40, 0.1), _event("exit", adapt_peak, 9.0)],
                                          "adapt_seconds": {"training": 7.0, "total": 9.0}, "query_accuracy": 0.8}}


def test_report_says_met_or_missed_against_the_goals():
    report = {"command": "python -m bench.memory_profile --model m.tflite", "model": "m.tflite", "model_bytes": 2**20,
              "support_size": 25, "query_size": 10, "rounds": 3, "machine": "cpu", "runs": [
                  _run("LiteRT before", 500, 575), _run("LiteRT now", 128, 161)]}
    text = render(report)
    assert "| `predict` | 500 missed | 128 met | <= 128 |" in text
    assert "| `adapt` | 575 missed | 161 missed | <= 160 |" in text
    assert "| `infer`, batch 1 (ms) | 2.50 | 2.50 |" in text
    assert "| infer: first call | 90 | 30 | 90 | 30 |" in text
    assert "Command: `python -m bench.memory_profile --model m.tflite`." in text


def test_images_are_the_first_stamps_of_each_class(tmp_path):
    for name in STAMP_CLASSES:
        (tmp_path / "stamps" / name).mkdir(parents=True)
        for k in range(9):
            (tmp_path / "stamps" / name / f"{k}.png").write_bytes(b"png")
    support, query = prepare_images(tmp_path / "out", tmp_path / "stamps")
    assert sorted(p.name for p in (support / "birds").iterdir()) == ["0.png", "1.png", "2.png", "3.png", "4.png"]
    assert sorted(p.name for p in (query / "birds").iterdir()) == ["5.png", "6.png"]
    assert len(list(support.glob("*/*"))) == 25 and len(list(query.glob("*/*"))) == 10


def test_too_few_stamps_name_the_package(tmp_path):
    with pytest.raises(FileNotFoundError, match="tuxpaint-stamps-default"):
        prepare_images(tmp_path / "out", tmp_path / "missing")


def test_a_reopened_model_allocates_its_signatures_anew():
    events = [_event("call infer", 10, 0.1), _event("reopen model", 8, 0.2), _event("call infer", 12, 0.3)]
    assert [p["phase"] for p in phases(events)] == ["infer: first call", "reopen model", "infer: first call"]


def test_the_resident_set_by_kind_is_read_from_proc_status():
    from bench.worker_process import parse_resident_kinds

    status = "VmHWM:\t  183000 kB\nVmRSS:\t  140000 kB\nRssAnon:\t   97000 kB\nRssFile:\t   38000 kB\nRssShmem:\t    5000 kB\n"
    assert parse_resident_kinds(status) == {"anon": 97000, "file": 38000, "shmem": 5000}
    assert parse_resident_kinds(status.replace("RssShmem", "Other")) is None  # a part missing: no breakdown


def test_the_kind_table_shows_the_now_runs_after_each_phase():
    def kinds_event(phase, rss_mib, anon, file, shmem, seconds):
        return {**_event(phase, rss_mib + 5, seconds), "rss_kib": rss_mib * 1024,
                "kinds_kib": {"anon": anon * 1024, "file": file * 1024, "shmem": shmem * 1024}}

    now = _run("LiteRT now", 120, 180)
    now["variant"] = "now"
    now["adapt"] = {**now["adapt"], "events": [kinds_event("import", 40, 10, 30, 0, 0.1),
                                               kinds_event("call infer", 100, 55, 31, 14, 0.5),
                                               kinds_event("exit", 90, 45, 31, 14, 9.0)]}
    before = {**_run("LiteRT before", 125, 200), "variant": "before"}
    report = {"command": "c", "model": "m.tflite", "model_bytes": 2**20, "support_size": 25, "query_size": 10,
              "rounds": 1, "machine": "cpu", "runs": [before, now]}
    text = render(report)
    assert "| phase | LiteRT now: RSS | anon | file | shmem |" in text  # the before run recorded no kinds
    assert "| infer: first call | 100 | 55 | 31 | 14 |" in text
    assert "## `adapt` by phase: what is resident" not in render({**report, "runs": [before]})
