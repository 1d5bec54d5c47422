# syntax=docker/dockerfile:1
# rulesched image: docker build -t rulesched:0.1.0 .
# Pin a digest as well for reproducible builds: FROM python:3.11.14-slim@sha256:...

FROM python:3.11.14-slim AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY rulesched ./rulesched
# The project's wheel and every dependency's, so the runtime stage installs offline and needs no compiler.
RUN pip wheel --wheel-dir /wheels .

FROM python:3.11.14-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# The wheels are bind-mounted from the build stage, so none of them stays in a layer.
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels /wheels/rulesched-*.whl \
    && rulesched --help >/dev/null
# Numeric, so runAsNonRoot can verify it without an /etc/passwd entry.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["rulesched"]
CMD ["serve", "--rules", "/etc/rulesched/rules", "--host", "127.0.0.1", "--port", "8888"]
