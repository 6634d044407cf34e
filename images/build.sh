#!/usr/bin/env bash
# Builds the agent-only image and, with --base, a training image with the
# agent as ENTRYPOINT, using buildah (no Docker engine, works offline when the
# base image is already in local storage).
#
#   images/build.sh [--agent PATH] [--tag NAME] [--base IMAGE --image NAME]
#
# Both images carry LICENSE and THIRD_PARTY_NOTICES (the licences of what
# the static binary links) under /usr/share/doc/distjob-agent/.
#
# Extra buildah global options (e.g. --root DIR --storage-driver vfs) come
# from $BUILDAH_OPTS; build options (e.g. --isolation chroot) from
# $BUILDAH_BUILD_OPTS.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agent="$here/../bazel-bin/agent/distjob-agent"
tag="localhost/distjob-agent:latest"
base=""
image=""
while [ $# -gt 0 ]; do
  case "$1" in
    --agent) agent="$2"; shift 2 ;;
    --tag) tag="$2"; shift 2 ;;
    --base) base="$2"; shift 2 ;;
    --image) image="$2"; shift 2 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "build.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ ! -x "$agent" ]; then
  echo "build.sh: agent binary '$agent' is missing: run" \
       "\`bazel build //agent:distjob-agent\` or pass --agent PATH" >&2
  exit 2
fi
if [ -n "$base" ] && [ -z "$image" ]; then
  image="localhost/$(basename "${base%%[:@]*}")-distjob:latest"
fi

# shellcheck disable=SC2086
buildah_cmd=(buildah ${BUILDAH_OPTS:-})
# shellcheck disable=SC2206
build_opts=(${BUILDAH_BUILD_OPTS:-})

context="$(mktemp -d)"
trap 'rm -rf "$context"' EXIT
bin="$context/rootfs/usr/local/bin"
mkdir -p "$bin"
cp "$agent" "$bin/distjob-agent"
chmod 0755 "$bin/distjob-agent"
# The torchrun drop-in: the agent acts as `run` when invoked as torchrun.
ln -s distjob-agent "$bin/torchrun"
ln -s usr/local/bin/distjob-agent "$context/rootfs/distjob-agent"
doc="$context/rootfs/usr/share/doc/distjob-agent"
mkdir -p "$doc"
for f in LICENSE THIRD_PARTY_NOTICES; do
  install -m 0644 "$here/../$f" "$doc/$f"
done

"${buildah_cmd[@]}" bud "${build_opts[@]}" -f "$here/agent.Containerfile" \
  -t "$tag" "$context"
if [ -n "$base" ]; then
  "${buildah_cmd[@]}" bud "${build_opts[@]}" -f "$here/Containerfile" \
    --build-arg "AGENT_IMAGE=$tag" --build-arg "BASE=$base" \
    -t "$image" "$context"
fi
