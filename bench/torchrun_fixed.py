"""Debian's torchrun (PyTorch 1.13) made usable on Python 3.11.

On 3.11, iterating an IntFlag skips its zero member, so 1.13's
Std.from_str("0") returns None and torchrun crashes with its default
`-r 0 -t 0`. This wrapper fixes only that function and runs torchrun
unchanged, so the benchmark measures torchrun as users run it (without
the redirect/tee threads that `-r 1 -t 1` would add). A PyTorch whose
module lacks the regexes the fix uses (a 2.x that parses these flags its
own way) runs unpatched.
"""

import re
import sys

from torch.distributed.elastic.multiprocessing import api


def _from_str(cls, vm):
    if re.match(api._VALUE_REGEX, vm):
        return cls(int(vm))
    if re.match(api._MAPPING_REGEX, vm):
        return {int(i): cls(int(v))
                for i, v in (m.split(":") for m in vm.split(","))}
    raise ValueError(f"{vm} does not match {api._VALUE_REGEX} or "
                     f"{api._MAPPING_REGEX}")


if hasattr(api, "_VALUE_REGEX") and hasattr(api, "_MAPPING_REGEX"):
    api.Std.from_str = classmethod(_from_str)

if __name__ == "__main__":
    from torch.distributed.run import main
    sys.argv[0] = "torchrun"
    main()
