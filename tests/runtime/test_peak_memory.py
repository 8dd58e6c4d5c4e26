"""Reading the process's resident memory (``tflite_train.runtime.peak_memory``)."""

import pytest

from tflite_train.runtime.peak_memory import ResidentMemory, parse_proc_status, resident_memory

pytestmark = pytest.mark.pi

STATUS = "Name:\tpython\nVmPeak:\t  900000 kB\nVmHWM:\t  123456 kB\nVmRSS:\t   65432 kB\nThreads:\t1\n"


def test_the_high_water_mark_and_the_resident_set_in_bytes():
    assert parse_proc_status(STATUS) == ResidentMemory(123456 * 1024, 65432 * 1024)


def test_no_high_water_mark_is_none_and_no_rss_is_unknown():
    assert parse_proc_status("Name:\tpython\nVmRSS:\t 1 kB\n") is None
    assert parse_proc_status("VmHWM:\t 7 kB\n") == ResidentMemory(7 * 1024, None)
    assert parse_proc_status("VmHWM:\t seven kB\n") is None


def test_this_process_has_a_peak_at_least_its_resident_set():
    memory = resident_memory()
    assert memory.peak_bytes > 2**20
    assert memory.current_bytes is None or 0 < memory.current_bytes <= memory.peak_bytes
    assert memory.to_dict() == {"peak_bytes": memory.peak_bytes, "current_bytes": memory.current_bytes}
