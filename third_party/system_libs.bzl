"""A repository rule that wraps a Debian-installed library for Bazel.

In the style of TensorFlow's third_party/systemlibs: the repository holds no
sources, only a BUILD file whose link flags come from pkg-config. Headers are
found on the compiler's default include path (/usr/include). The static link
line is used so that //agent:distjob-agent can be linked with -static; the
same flags resolve to shared objects for ordinary (test) links.
"""

def _pkg_config(ctx, args):
    result = ctx.execute(["pkg-config"] + args)
    if result.return_code != 0:
        fail("pkg-config %s failed: %s\nInstall the Debian -dev packages " %
             (" ".join(args), result.stderr) + "listed in .ci/install-deps.")
    return result.stdout.strip().split(" ") if result.stdout.strip() else []

def _system_library_impl(ctx):
    flags = ["--libs"]
    if ctx.attr.static:
        flags = ["--static", "--libs"]
    linkopts = _pkg_config(ctx, flags + ctx.attr.pkg_config)
    defines = [
        f[2:]
        for f in _pkg_config(ctx, ["--cflags"] + ctx.attr.pkg_config)
        if f.startswith("-D")
    ]
    ctx.template(
        "BUILD.bazel",
        ctx.attr.build_file,
        substitutions = {
            "%{linkopts}": repr(linkopts),
            "%{defines}": repr(defines),
        },
    )
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)

system_library = repository_rule(
    implementation = _system_library_impl,
    attrs = {
        "build_file": attr.label(allow_single_file = True, mandatory = True),
        "pkg_config": attr.string_list(mandatory = True),
        "static": attr.bool(default = True),
    },
    environ = ["PKG_CONFIG_PATH"],
    local = True,
)
