"""One libFuzzer target per parser of outside input, and its seed test."""

# Our code in fuzz/ builds with -Werror as every other package does.
FUZZ_COPTS = ["-Werror"]

def distjob_fuzzer(name, deps):
    """`name` (from name.cc) and `name`_seeds_test.

    Under --config=fuzz (clang) `name` links libFuzzer's main; otherwise it
    links standalone_main, which runs each file or directory named once.
    The test replays corpus/<name minus _fuzzer>/ under every build,
    so the default and --config=asan runs keep the seeds and every crash
    kept there passing.
    """
    corpus = name[:-len("_fuzzer")]
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = [name + ".cc"],
        copts = FUZZ_COPTS,
        linkopts = select({
            ":libfuzzer": ["-fsanitize=fuzzer"],
            "//conditions:default": [],
        }),
        deps = deps + select({
            ":libfuzzer": [],
            "//conditions:default": [":standalone_main"],
        }),
    )
    native.cc_test(
        name = name + "_seeds_test",
        size = "small",
        srcs = [name + ".cc"],
        copts = FUZZ_COPTS,
        args = ["fuzz/corpus/" + corpus],
        data = native.glob(["corpus/" + corpus + "/*"]),
        deps = deps + [":standalone_main"],
    )
