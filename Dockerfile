# rulesched image: deploy/build-image.sh builds it (docs/operations/deploying.md).
# The wheels are made on the host first (`pip wheel`, with the host's own package index and certificates), so
# the build itself needs no network. BASE is any image with Python 3.11 and its venv module: the pinned slim
# image by default (add its digest, python:3.11.14-slim@sha256:..., for a reproducible build), a Debian
# bookworm image where no registry is reachable (tests/test_image.py).
ARG BASE=python:3.11.14-slim
FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
    PATH=/opt/rulesched/bin:$PATH
# The wheels' digest (deploy/build-image.sh passes it): a layer cache keyed by the RUN line alone (buildah's)
# would otherwise keep the last build's rulesched after a change.
ARG WHEELS=unknown
# A virtual environment, the same on either base, whose `python` the probes run. The wheels are bind-mounted
# from the build context, so none of them stays in a layer; pip itself leaves with them.
RUN --mount=type=bind,source=build/image/wheels,target=/wheels \
    python3 -m venv /opt/rulesched \
    && pip install --no-index --find-links=/wheels /wheels/rulesched-*.whl \
    && pip uninstall --yes --quiet pip setuptools \
    && rulesched --help >/dev/null
# Numeric, so runAsNonRoot can verify it without an /etc/passwd entry.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["rulesched"]
CMD ["serve", "--rules", "/etc/rulesched/rules", "--host", "127.0.0.1", "--port", "8888"]
