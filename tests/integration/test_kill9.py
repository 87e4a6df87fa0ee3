"""kill -9 durability, bounded: bench/killnine.py with 5 restarts under load.

A confluent-kafka producer (acks=all) and a consumer group committing
synchronously load a broker child process that is SIGKILLed and restarted on
the same port and data directory five times. Every acknowledged record must
be read back at its offset with its value, and no acknowledged commit may be
above what the broker returns for the group.
"""

from __future__ import annotations

from bench import killnine


def test_acknowledged_records_and_commits_survive_kill_9(tmp_path):
    result = killnine.run(5, rate=1000, seed=9, data_dir=tmp_path)
    assert result["restarts"] == 5
    # the check had something to check
    assert result["acked_records"] > 0 and result["acked_commits"] > 0, result
    assert not result["client_errors"], result["client_errors"]
    assert result["records_lost"] == 0, result["lost_examples"]
    assert result["commits_lost"] == 0, (result["lost_commit_examples"], result["final_committed"])
