# syntax=docker/dockerfile:1
# kafkalite: a Kafka-wire-compatible broker. See docs/docker.md.
#
#   docker build -t kafkalite .
#   docker run -p 9092:9092 -v kafkalite-data:/var/lib/kafkalite kafkalite
#
# Needs BuildKit (the default builder since Docker 23) for the wheel mount.

ARG PYTHON_IMAGE=python:3.11-slim

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
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels kafkalite \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/kafkalite --create-home --shell /usr/sbin/nologin kafkalite
USER kafkalite
WORKDIR /var/lib/kafkalite
VOLUME ["/var/lib/kafkalite"]
EXPOSE 9092
# `kafkalite health` sends ApiVersions to KAFKALITE_BOOTSTRAP and exits 0 or 1
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 CMD ["kafkalite", "health"]
# the broker handles SIGTERM itself (finishes requests, flushes, exits 0)
STOPSIGNAL SIGTERM
ENTRYPOINT ["kafkalite"]
CMD ["serve"]
