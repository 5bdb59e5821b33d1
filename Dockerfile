# syntax=docker/dockerfile:1
# Dagger on Spark: one image for every way the Helm chart runs a job (helm/dagger).
#
#   make image                      # docker build -t dagger-on-spark:<version> .
#   docker run --rm -v $PWD/configs/quickstart.json:/etc/dagger/job.json dagger-on-spark:0.1.0
#
# Every build step is a make target (`make image-root`), which the test suite runs too, so a broken step fails CI
# on machines without Docker. The build stage compiles the columnar Kafka helper; the final image has no compiler.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev make maven openjdk-17-jdk-headless \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md Makefile ./
COPY dagger ./dagger
COPY udfs ./udfs
# the package and its runtime extras in /opt/dagger/venv, the Kafka helper built into /opt/dagger/native,
# the spark-submit entry file at /opt/dagger/entry.py, Spark's Kafka connector and spark-avro (Maven Central) and
# Dagger's JVM classes (compiled by the JDK) in /opt/dagger/jars; then a smoke test
RUN make image-root IMAGE_ROOT=/opt/dagger PYTHON=python3.11

FROM ${PYTHON_IMAGE}
# Java 17 for Spark; tini reaps the JVM and Python workers and forwards SIGTERM (a graceful stop finishes the
# running micro-batch); procps for Spark's scripts
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --gid 185 spark \
    && useradd --uid 185 --gid 185 --home-dir /opt/dagger/work --shell /usr/sbin/nologin spark \
    && mkdir -p /etc/dagger /var/lib/dagger/checkpoints /opt/dagger/work \
    && chown -R 185:185 /var/lib/dagger /opt/dagger/work
COPY --from=build --chown=185:185 /opt/dagger /opt/dagger
ENV PATH=/opt/dagger/venv/bin:$PATH \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 \
    SPARK_HOME=/opt/dagger/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/dagger/venv/bin/python \
    DAGGER_NATIVE_CACHE=/opt/dagger/native \
    DAGGER_JARS=/opt/dagger/jars \
    DAGGER_CLASS_CACHE=read \
    TZ=UTC \
    PYTHONUNBUFFERED=1
USER 185:185
WORKDIR /opt/dagger/work
# smoke test: Spark starts from the image's pyspark with its Java
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN spark-submit --version 2>&1 | grep -q version
ENTRYPOINT ["/usr/bin/tini", "--", "dagger"]
CMD ["run", "/etc/dagger/job.json"]
