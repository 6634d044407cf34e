#!/usr/bin/env bash
# The project's test command (README): builds the agent, runs the unit tests
# under Bazel, then the black-box, integration and end-to-end suites against
# the built static binary. Extra arguments go to pytest (e.g. -k NAME).
set -euo pipefail
cd "$(dirname "$0")/.."

bazel build //agent:distjob-agent
bazel test //...

# Debian's interpreter: it has python3-torch and python3-pytest.
exec /usr/bin/python3 -m pytest -p no:cacheprovider -ra tests "$@"
