import os
import subprocess
import sys

from broker_core.cli import main as seglog
from format import layout
from format.record import Header, SimpleRecord
from format.record_batch import build_batch
from format.segment import LogSegment


def make_segment(directory):
    segment = LogSegment.open(directory, 0, index_interval_bytes=100)
    for i in range(5):
        segment.append(build_batch([SimpleRecord(b"value-%d" % i, b"key-%d" % i, 1000 + i, (Header("h", b"x"),))],
                                   base_offset=i))
    segment.close()
    return [os.path.join(directory, n) for n in
            (layout.log_file_name(0), layout.offset_index_file_name(0), layout.time_index_file_name(0))]


def test_dump_prints_batches_records_and_index_entries(tmp_path, capsys):
    log, index, timeindex = make_segment(tmp_path)
    assert seglog(["dump", "--print-data-log", log, index, timeindex]) == 0
    out = capsys.readouterr().out.splitlines()
    batches = [line for line in out if line.startswith("baseOffset:")]
    assert len(batches) == 5 and all("isvalid: true" in b and "compresscodec: none" in b for b in batches)
    records = [line for line in out if line.startswith("| offset:")]
    assert records[2].startswith("| offset: 2 CreateTime: 1002 keySize: 5 valueSize: 7")
    assert records[2].endswith("headerKeys: [h] key: key-2 payload: value-2")
    assert any(line.startswith("offset: ") and "position: " in line for line in out)
    assert any(line.startswith("timestamp: ") for line in out)


def test_dump_without_data_prints_headers_only(tmp_path, capsys):
    log, _, _ = make_segment(tmp_path)
    assert seglog(["dump", log]) == 0
    assert "| offset:" not in capsys.readouterr().out


def test_dump_reports_truncation_with_position_and_fails(tmp_path, capsys):
    log, _, _ = make_segment(tmp_path)
    size = os.path.getsize(log)
    with open(log, "r+b") as f:
        f.truncate(size - 3)
    assert seglog(["dump", log]) == 1
    out = capsys.readouterr().out
    assert "Found corruption" in out and log in out and "truncated" in out


def test_seglog_console_script_runs_dump(tmp_path):
    log, _, _ = make_segment(tmp_path)
    result = subprocess.run([os.path.join(os.path.dirname(sys.executable), "seglog"), "dump", log],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("baseOffset:") == 5
