#!/usr/bin/env bash
# Build the rulesched image with podman or docker, whichever is here: deploy/build-image.sh [OPTIONS] [TAG]
#
# The wheels (rulesched's and every dependency's) are made on this machine with `pip wheel`, through the
# package index and certificates your pip already uses; the Dockerfile installs them with no network.
#   TAG              the image to build [default: rulesched:VERSION, VERSION from pyproject.toml]
#   --push           push TAG (a name in your registry) and print its digest for deploy/kustomization.yaml
#   --debian-base    build on a Debian bookworm base made here with mmdebstrap (no registry needed)
#   --engine         print the engine that would build (podman, else a docker whose daemon answers) and exit
# Environment: PYTHON (a Python 3.11, the image's, that makes the wheels) [python3], ENGINE [found],
#              BASE (the Dockerfile's base image) [python:3.11.14-slim].
set -euo pipefail
cd "$(dirname "$0")/.."

DEBIAN_BASE=localhost/rulesched-base:bookworm

engine() {
  if [ -n "${ENGINE:-}" ]; then echo "$ENGINE"
  elif command -v podman >/dev/null; then echo podman
  elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then echo docker
  else
    echo "build-image.sh: neither podman nor a running docker is here (apt-get install podman buildah runc)" >&2
    return 3
  fi
}

debian_base() {  # The base image from Debian's own packages, made once and kept in the engine's storage.
  if "$1" image inspect "$DEBIAN_BASE" >/dev/null 2>&1; then return; fi
  command -v mmdebstrap >/dev/null || { echo "build-image.sh: --debian-base needs mmdebstrap" >&2; return 3; }
  local tar; tar=$(mktemp --suffix=.tar)
  mmdebstrap --quiet --variant=minbase --include=python3,python3-venv bookworm "$tar"
  "$1" import "$tar" "$DEBIAN_BASE" >/dev/null
  rm -f "$tar"
}

wheels() {  # Every wheel the image installs, made by the image's Python version (their tags must match it).
  local python=${PYTHON:-python3}
  if ! "$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    echo "build-image.sh: the image runs Python 3.11; set PYTHON to a Python 3.11 to build its wheels" >&2
    return 2
  fi
  rm -rf build/image/wheels
  "$python" -m pip wheel --quiet --disable-pip-version-check --wheel-dir build/image/wheels .
}

main() {
  local push=no debian=no tag=""
  for arg in "$@"; do
    case "$arg" in
      --engine) engine; return ;;
      --push) push=yes ;;
      --debian-base) debian=yes ;;
      -*) echo "build-image.sh: unknown option $arg" >&2; return 2 ;;
      *) tag=$arg ;;
    esac
  done
  local tool; tool=$(engine)
  tag=${tag:-rulesched:$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)}
  local base=${BASE:-}
  if [ "$debian" = yes ]; then debian_base "$tool"; base=$DEBIAN_BASE; fi
  wheels
  local digest; digest=$(cd build/image/wheels && sha256sum -- * | sha256sum | cut -d' ' -f1)
  "$tool" build --quiet ${base:+--build-arg "BASE=$base"} --build-arg "WHEELS=$digest" --tag "$tag" . >/dev/null
  echo "image: $tag"
  echo "id: $("$tool" image inspect --format '{{.Id}}' "$tag")"
  echo "size: $("$tool" image inspect --format '{{.Size}}' "$tag") bytes"
  if [ "$push" = yes ]; then pushed "$tool" "$tag"; fi
}

pushed() {  # Push, then print the kustomization's images: entry with the registry's digest.
  local digest
  if [ "$1" = podman ]; then
    local file; file=$(mktemp)
    podman push --digestfile "$file" "$2"
    digest=$(cat "$file"); rm -f "$file"
  else
    docker push "$2" >/dev/null
    digest=$(docker image inspect --format '{{index .RepoDigests 0}}' "$2"); digest=${digest#*@}
  fi
  echo "digest: $digest"
  echo "for deploy/kustomization.yaml:"
  echo "images:"
  echo "- name: rulesched"
  echo "  newName: ${2%:*}"
  echo "  digest: $digest"
}

main "$@"
