# kafkalite: a Kafka-wire-compatible broker. See docs/docker.md.
#
#   docker build -t kafkalite .
#   docker run -p 9092:9092 -v kafkalite-data:/var/lib/kafkalite kafkalite
#
# Needs BuildKit (Docker Engine 23+ with buildx, the default builder) for the wheel mount, and
# its built-in Dockerfile frontend 1.6+ (Engine 25+, or buildx with BuildKit 0.12+) for the
# health check's --start-interval. There is deliberately no `# syntax=` line: that makes every
# build fetch the frontend from Docker Hub, so offline and mirror-only builds fail.
#
# The base is pinned by tag and digest (the multi-platform index of python:3.11-slim-bookworm,
# Python 3.11.16, as Docker Hub served it in August 2026). docs/docker.md says how to refresh it;
# --build-arg PYTHON_IMAGE=... builds on a mirror's copy or a local stand-in instead.
ARG PYTHON_IMAGE=python:3.11.16-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# ---- build: wheels for kafkalite and its dependencies (all of them ship manylinux wheels)
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY broker ./broker
COPY protocol ./protocol
COPY storage ./storage
RUN pip wheel --wheel-dir /wheels .

# ---- runtime: the slim base, the wheels installed, nothing else
FROM ${PYTHON_IMAGE}
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    KAFKALITE_LISTENERS=PLAINTEXT://0.0.0.0:9092 \
    KAFKALITE_DATA_DIR=/var/lib/kafkalite \
    KAFKALITE_LOG_FORMAT=json \
    KAFKALITE_BOOTSTRAP=127.0.0.1:9092
# uid and gid 10001; no home directory is created (the data directory would get dot files)
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels kafkalite \
 && groupadd --system --gid 10001 kafkalite \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /var/lib/kafkalite --shell /usr/sbin/nologin kafkalite \
 && install -d -o 10001 -g 10001 -m 0755 /var/lib/kafkalite
USER 10001:10001
WORKDIR /var/lib/kafkalite
VOLUME ["/var/lib/kafkalite"]
EXPOSE 9092
# `kafkalite health` sends ApiVersions to KAFKALITE_BOOTSTRAP and exits 0 or 1. Every 0.5 s
# until the first success (Engine 25+; older engines use the interval), then every 30 s.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --start-interval=500ms --retries=3 CMD ["kafkalite", "health"]
# the broker handles SIGTERM itself (finishes requests, flushes, exits 0)
STOPSIGNAL SIGTERM
ENTRYPOINT ["kafkalite"]
CMD ["serve"]
