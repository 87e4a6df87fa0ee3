def pytest_configure(config):
    config.addinivalue_line("markers", "soak: long-running churn against a live group (bench/churn.py); deselect with -m 'not soak'")
    config.addinivalue_line("markers", "reference: the same test run against a real Apache Kafka broker, 4.4 by default (tests/reference_kafka.py)")


def pytest_terminal_summary(terminalreporter):
    """The starvation gate's figures (tests/soak/test_starvation.py), one line per run of this session."""
    import json
    import time
    from pathlib import Path

    out = Path(__file__).resolve().parents[2] / "build" / "starvation"
    rows = []
    for path in sorted(out.glob("*.json")) if out.is_dir() else []:
        if path.stat().st_mtime < time.time() - 4 * 3600:
            continue
        s = json.loads(path.read_text())
        rows.append(
            f"{s['broker']:9} {s['protocol']:8} overlaps={s['overlaps']} settled={s['settled']} in {s['settle_seconds']} s "
            f"expired={s['members_expired']} crashes={s['crashes']} loop_stall_max={s['loop_stall_max_ms']} ms (loop cpu in it {s.get('loop_worst_stall_cpu_ms')} ms) load_end={s['loadavg_end']}"
        )
    if rows:
        terminalreporter.write_sep("-", f"under {s['hogs']} CPU hogs (build/starvation/)")
        for row in rows:
            terminalreporter.write_line(row)
