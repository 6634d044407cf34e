"""cc_grpc_library over Debian's protoc and grpc_cpp_plugin.

Bazel 4.2.3's native proto rules want a protobuf source checkout; a genrule
running the system generators is all this build needs.
"""

def cc_grpc_library(name, src, deps = [], grpc = True, visibility = None):
    """Generates C++ messages (and gRPC stubs) for one .proto file.

    Args:
      name: the cc_library to define.
      src: the .proto file, relative to this package.
      deps: other cc_grpc_library targets whose .proto files src imports.
      grpc: whether src declares services.
      visibility: of the cc_library.
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    if grpc:
        outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    plugin = "--plugin=protoc-gen-grpc=$$(command -v grpc_cpp_plugin) --grpc_out=$(GENDIR) " if grpc else ""
    native.genrule(
        name = name + "_gen",
        srcs = [src] + [d + "_srcs" for d in deps],
        outs = outs,
        cmd = "protoc -I. --cpp_out=$(GENDIR) " + plugin + "$(location " + src + ")",
    )
    native.filegroup(name = name + "_srcs", srcs = [src])
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + [
            "@com_github_grpc_grpc//:grpc++",
            "@com_google_protobuf//:protobuf",
        ] + (["//third_party:grpc_plugins"] if grpc else []),
        visibility = visibility,
    )
