"""Start-up figures of the kafkalite image, for docs/benchmarks.md.

    .venv/bin/python -m tests.docker.measure [--runs 10] [--image kafkalite:test]

Uses the private engine (tools/docker/engine.sh, started and stopped here if it is not
running) and an image the tests built (``make test`` or ``pytest tests/docker``; pass
--build to build it from the Dockerfile on the stand-in base first). Each run starts a
container on a new named volume and measures, on the daemon's clock, the container's
start to its READY line and to ``healthy``, and on this host's clock ``docker run`` to the
``healthy`` event; 2 s after healthy, the broker's VmRSS. Prints a JSON summary.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid

from .harness import BASE_IMAGE, LABEL, ROOT, Engine, loadavg


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--image", default="kafkalite:test")
    p.add_argument("--build", action="store_true", help="build --image from the Dockerfile on the stand-in base first")
    args = p.parse_args()
    engine = Engine()
    docker = engine.start()
    try:
        if args.build:
            engine.base_image()
            docker.run("build", "-t", args.image, "--build-arg", f"PYTHON_IMAGE={BASE_IMAGE}", str(ROOT), timeout=1800)
        runs = []
        load_before = loadavg()
        for _ in range(args.runs):
            name = f"kl-measure-{uuid.uuid4().hex[:8]}"
            volume = f"{name}-data"
            docker.run("volume", "create", "--label", LABEL, volume)
            try:
                t0 = time.monotonic()
                timings = docker.run_until_healthy(["-v", f"{volume}:/var/lib/kafkalite", args.image], name)
                timings["run_to_healthy_s"] = time.monotonic() - t0
                time.sleep(2)  # idle: no client has connected
                status = docker.out("exec", name, "cat", "/proc/1/status")
                timings["idle_rss_mib"] = int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024
                runs.append(timings)
            finally:
                docker.run("rm", "-f", name, check=False)
                docker.run("volume", "rm", "-f", volume, check=False)
        summary = {
            "image": args.image,
            "image_mb": int(docker.inspect(args.image, "{{.Size}}")) / 1e6,
            "base_mb": int(docker.inspect(BASE_IMAGE, "{{.Size}}")) / 1e6,
            "engine": docker.out("version", "--format", "{{.Server.Version}}"),
            "runs": len(runs),
            "loadavg_before": load_before,
            "loadavg_after": loadavg(),
        }
        for key in ("start_to_ready_s", "start_to_healthy_s", "run_to_healthy_s", "idle_rss_mib"):
            values = sorted(r[key] for r in runs)
            summary[key] = {"median": round(statistics.median(values), 3), "min": round(values[0], 3), "max": round(values[-1], 3)}
        print(json.dumps(summary, indent=2))
    finally:
        docker.cleanup()
        engine.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
