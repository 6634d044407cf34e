#!/usr/bin/env bash
# Builds a release of distjob-agent into dist/, offline, the version (the
# VERSION file) in every name:
#
#   distjob-agent-V-linux-ARCH            the static binary (stamped: its
#                                         --version names the commit)
#   distjob-agent-V-linux-ARCH.sha256     its checksum: sha256sum -c
#   distjob-agent-V-LICENSE               Apache-2.0
#   distjob-agent-V-THIRD_PARTY_NOTICES   the licences of what it links
#   distjob-agent-V-image.oci.tar         the agent-only image
#   distjob-agent-V-train-image.oci.tar   the training image (--base)
#
#   tools/release.sh --base IMAGE [--dist DIR] [--allow-dirty]
#
# IMAGE: the training image to build on, already in buildah's local storage
# (no registry is reached). The images are also left in that storage as
# localhost/distjob-agent:V and localhost/<base name>-distjob:V. Extra
# buildah options come from $BUILDAH_OPTS and $BUILDAH_BUILD_OPTS (see
# images/build.sh), extra Bazel build options from $BAZEL_BUILD_OPTS.
# A tree with uncommitted changes is refused unless --allow-dirty: the
# binary would say "-dirty" after its commit.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dist="$root/dist"
base=""
allow_dirty=0
while [ $# -gt 0 ]; do
  case "$1" in
    --base) base="$2"; shift 2 ;;
    --dist) dist="$2"; shift 2 ;;
    --allow-dirty) allow_dirty=1; shift ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "release.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$base" ]; then
  echo "release.sh: --base IMAGE is required (the training image to build" \
       "on, in buildah's local storage)" >&2
  exit 2
fi
cd "$root"
version="$(tr -d '[:space:]' < VERSION)"
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+([.+-][0-9A-Za-z.+-]*)?$ ]]; then
  echo "release.sh: VERSION: '$version' is not MAJOR.MINOR.PATCH" >&2
  exit 2
fi
if [ "$allow_dirty" = 0 ] &&
   [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "release.sh: the tree has uncommitted changes; commit them or pass" \
       "--allow-dirty" >&2
  exit 2
fi
case "$(uname -m)" in
  x86_64) arch=amd64 ;;
  aarch64) arch=arm64 ;;
  *) arch="$(uname -m)" ;;
esac

# The notices must cover exactly what the binary links before it ships.
tools/notices.py --check
# shellcheck disable=SC2086
bazel build ${BAZEL_BUILD_OPTS:-} //agent:distjob-agent
agent="$(bazel info ${BAZEL_BUILD_OPTS:-} bazel-bin)/agent/distjob-agent"

name="distjob-agent-$version"
binary="$name-linux-$arch"
mkdir -p "$dist"
rm -f "$dist/$name"-*
install -m 0755 "$agent" "$dist/$binary"
(cd "$dist" && sha256sum "$binary" > "$binary.sha256")
install -m 0644 LICENSE "$dist/$name-LICENSE"
install -m 0644 THIRD_PARTY_NOTICES "$dist/$name-THIRD_PARTY_NOTICES"

tag="localhost/distjob-agent:$version"
image="localhost/$(basename "${base%%[:@]*}")-distjob:$version"
images/build.sh --agent "$dist/$binary" --tag "$tag" --base "$base" \
  --image "$image"
# shellcheck disable=SC2086
buildah_cmd=(buildah ${BUILDAH_OPTS:-})
"${buildah_cmd[@]}" push "$tag" "oci-archive:$dist/$name-image.oci.tar:$tag"
"${buildah_cmd[@]}" push "$image" \
  "oci-archive:$dist/$name-train-image.oci.tar:$image"
echo "release.sh: $dist:"
ls -l "$dist" | sed 1d
