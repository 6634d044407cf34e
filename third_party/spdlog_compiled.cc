// The implementations of spdlog and fmt, compiled once for the whole build.
//
// Debian ships neither as a static archive, and the agent links fully
// statically, so they used to be header-only (FMT_HEADER_ONLY, no
// SPDLOG_COMPILED_LIB): then every translation unit that includes
// common/logging.h compiled all of spdlog's and fmt's implementation again,
// about ten seconds of a 17-second compile, in each of ~60 units and each of
// CI's three builds. With SPDLOG_COMPILED_LIB (set for every unit in
// .bazelrc) the headers only declare; this unit, the one place the
// implementation headers are included, defines. What is instantiated here is
// what the project uses: the default logger's colour sink, base_sink with a
// std::mutex, and fmt's char formatting.
#include <fmt/format-inl.h>
#include <spdlog/async.h>
#include <spdlog/async_logger-inl.h>  // unused, but the thread pool names it
#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/details/thread_pool-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/spdlog-inl.h>

#include <mutex>

#ifndef SPDLOG_COMPILED_LIB
#error "spdlog_compiled.cc needs SPDLOG_COMPILED_LIB (.bazelrc)"
#endif

// fmt: the formatting core for char, which format.h only declares.
namespace fmt {
namespace detail {
template auto dragonbox::to_decimal(float x) noexcept
    -> dragonbox::decimal_fp<float>;
template auto dragonbox::to_decimal(double x) noexcept
    -> dragonbox::decimal_fp<double>;
template locale_ref::locale_ref(const std::locale& loc);
template auto locale_ref::get<std::locale>() const -> std::locale;
template auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl(locale_ref) -> char;
template void buffer<char>::append(const char*, const char*);
template void vformat_to(buffer<char>&, string_view,
                         basic_format_args<FMT_BUFFER_CONTEXT(char)>,
                         locale_ref);
}  // namespace detail
}  // namespace fmt

// spdlog: the sinks the project instantiates (common/logging.cc derives from
// base_sink<std::mutex>; the registry's default logger is a colour sink).
template class spdlog::sinks::base_sink<std::mutex>;
template class spdlog::sinks::base_sink<spdlog::details::null_mutex>;
template class spdlog::sinks::ansicolor_sink<spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stdout_sink<
    spdlog::details::console_mutex>;
template class spdlog::sinks::ansicolor_stderr_sink<
    spdlog::details::console_mutex>;
