"""Reading a process's CPU time and memory from /proc, and describing the machine."""

from __future__ import annotations

import os
import platform
import re
import resource

CLK_TCK = os.sysconf("SC_CLK_TCK")


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages, as /proc/loadavg gives them ("?" where there is none)."""
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def cpu_split(pid: int) -> tuple[float, float]:
    """(utime, stime) of ``pid`` (all its threads), in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    # the command name may hold spaces or parentheses: split after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    # fields[0] is field 3 (state); utime and stime are fields 14 and 15
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_seconds(pid: int) -> float:
    """utime + stime of ``pid`` (all its threads), in seconds."""
    return sum(cpu_split(pid))


def oncpu_seconds(pid: int) -> float:
    """CPU time of ``pid``: the sum of its threads' ``schedstat`` run times (nanoseconds, where
    utime+stime counts 10 ms clock ticks), else utime+stime."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                total += int(f.read().split()[0])
        return total / 1e9
    except (OSError, ValueError, IndexError):
        return cpu_seconds(pid)


def thread_cpu_seconds(pid: int, tid: int) -> float:
    """utime + stime of one thread."""
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def main_thread_cpu_seconds() -> float:
    """CPU time of this process's main thread: the Python code calling produce() / consume()."""
    pid = os.getpid()
    return thread_cpu_seconds(pid, pid)


def self_cpu_seconds() -> float:
    """CPU time of this process (the client side: Python plus librdkafka threads)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    raise KeyError(key)


def rss_mb(pid: int) -> float:
    """Resident set size (VmRSS) in MB (10^6 bytes)."""
    return _status_kb(pid, "VmRSS") * 1024 / 1e6


def peak_rss_mb(pid: int) -> float:
    """High-water mark of the resident set (VmHWM) in MB."""
    return _status_kb(pid, "VmHWM") * 1024 / 1e6


def machine() -> dict[str, str]:
    info: dict[str, str] = {}
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info["cpu"] = model
    info["cores"] = str(os.cpu_count())
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"MemTotal:\s+(\d+) kB", f.read())
        info["memory"] = f"{int(m.group(1)) / 1024 / 1024:.1f} GiB" if m else "unknown"
    except OSError:
        info["memory"] = "unknown"
    info["kernel"] = f"{platform.system()} {platform.release()}"
    info["python"] = f"{platform.python_implementation()} {platform.python_version()}"
    try:
        import confluent_kafka

        ver = confluent_kafka.version()
        ver = ver[0] if isinstance(ver, tuple) else ver
        info["confluent-kafka"] = f"{ver} (librdkafka {confluent_kafka.libversion()[0]})"
    except ImportError:
        info["confluent-kafka"] = "not installed"
    for mod in ("uvloop", "structlog"):
        try:
            from importlib.metadata import version

            info[mod] = version(mod)
        except Exception:
            info[mod] = "not installed"
    return info
