#!/bin/sh
# Bazel's workspace status command (.bazelrc): the commit the tree is built
# from and whether tracked files differ from it. Both are STABLE_ keys: a
# change re-runs only the actions that read them (agent/build_info.bzl),
# then the link; a build without git, or outside a checkout, prints nothing
# and the binary says "unknown". It must never fail: Bazel would stop.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null) || exit 0
echo "STABLE_GIT_COMMIT $commit"
if [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  echo "STABLE_GIT_DIRTY true"
else
  echo "STABLE_GIT_DIRTY false"
fi
