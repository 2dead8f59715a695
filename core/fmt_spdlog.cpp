// fmt's and spdlog's implementations, compiled once for every psched target.
//
// Used header-only, both libraries compile their whole implementation into every file that logs or
// formats: measured with g++ 12, that is 7 s more per file at -O2 and 37 s more under ASan + UBSan
// (fmt alone), most of the build's time. Debian ships them only as shared libraries, which portable
// binaries must not need, so psched_core builds them in compiled mode (SPDLOG_COMPILED_LIB, no
// FMT_HEADER_ONLY; core/CMakeLists.txt) and this file holds their one copy: the -inl.h headers
// define the non-template code, and the instantiations below are the templates the headers declare
// extern (or leave undefined) in that mode and that psched uses.
#include <fmt/format-inl.h>

#include <spdlog/common-inl.h>
#include <spdlog/details/backtracer-inl.h>
#include <spdlog/details/log_msg-inl.h>
#include <spdlog/details/log_msg_buffer-inl.h>
#include <spdlog/details/os-inl.h>
#include <spdlog/details/periodic_worker-inl.h>
#include <spdlog/details/registry-inl.h>
#include <spdlog/logger-inl.h>
#include <spdlog/pattern_formatter-inl.h>
#include <spdlog/sinks/ansicolor_sink-inl.h>
#include <spdlog/sinks/base_sink-inl.h>
#include <spdlog/sinks/sink-inl.h>
#include <spdlog/sinks/stdout_color_sinks-inl.h>
#include <spdlog/sinks/stdout_sinks-inl.h>
#include <spdlog/spdlog-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE

// app/logging.cpp's sink.
template std::shared_ptr<spdlog::logger> spdlog::stderr_logger_mt<spdlog::synchronous_factory>(
    const std::string& logger_name);
