#include "common/log.h"

#include <unistd.h>

#include <ctime>
#include <exception>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/json.h"
#include "common/utf8.h"

namespace outbox {

namespace {

// The default logger has an empty name; a source logger is named after its source.
class LineFormatter final : public spdlog::formatter {
 public:
  LineFormatter(LogFormat format, std::string command) : format_(format), command_(std::move(command)) {}

  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    auto since = msg.time.time_since_epoch();
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(since);
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(since - seconds).count();
    std::time_t t = seconds.count();
    std::tm tm{};
    gmtime_r(&t, &tm);
    std::string_view message(msg.payload.data(), msg.payload.size());
    std::string_view source(msg.logger_name.data(), msg.logger_name.size());
    if (format_ == LogFormat::kText) {
      fmt::format_to(std::back_inserter(dest), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z ", tm.tm_year + 1900,
                     tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros / 1000);
      msg.color_range_start = dest.size();
      fmt::format_to(std::back_inserter(dest), "{:<5}", textLevel(msg.level));
      msg.color_range_end = dest.size();
      if (!source.empty()) fmt::format_to(std::back_inserter(dest), " [{}]", source);
      fmt::format_to(std::back_inserter(dest), " {}\n", message);
      return;
    }
    std::string line = fmt::format(R"({{"time":"{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z","level":"{}")",
                                   tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                                   micros, jsonLevel(msg.level));
    if (!source.empty()) {
      line += R"(,"source":")";
      appendJsonEscaped(line, source);
      line += '"';
    }
    line += R"(,"message":")";
    appendJsonEscaped(line, message, InvalidUtf8::kReplace);
    line += R"(","command":")";
    appendJsonEscaped(line, command_);
    line += fmt::format(R"(","pid":{}}})", static_cast<long>(::getpid()));
    line += '\n';
    dest.append(line.data(), line.data() + line.size());
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<LineFormatter>(format_, command_);
  }

 private:
  static std::string_view textLevel(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace: return "TRACE";
      case spdlog::level::debug: return "DEBUG";
      case spdlog::level::info: return "INFO";
      case spdlog::level::warn: return "WARN";
      case spdlog::level::err: return "ERROR";
      case spdlog::level::critical: return "CRIT";
      default: return "";
    }
  }
  static std::string_view jsonLevel(spdlog::level::level_enum level) {
    switch (level) {
      case spdlog::level::trace: return "trace";
      case spdlog::level::debug: return "debug";
      case spdlog::level::info: return "info";
      case spdlog::level::warn: return "warn";
      case spdlog::level::err: return "error";
      case spdlog::level::critical: return "critical";
      default: return "off";
    }
  }

  LogFormat format_;
  std::string command_;
};

std::mutex& loggersMutex() {
  static std::mutex mu;
  return mu;
}

struct Loggers {
  spdlog::level::level_enum level = spdlog::level::info;
  std::shared_ptr<spdlog::sinks::sink> stdoutSink;
  std::map<std::string, std::shared_ptr<spdlog::logger>> sources;  // stderr
  std::map<std::string, std::shared_ptr<spdlog::logger>> results;  // stdout
};

Loggers& loggers() {
  static Loggers l;  // GUARDED_BY(loggersMutex())
  return l;
}

std::shared_ptr<spdlog::sinks::sink> makeSink(bool toStdout, LogFormat format, const std::string& command) {
  auto mode = format == LogFormat::kJson ? spdlog::color_mode::never : spdlog::color_mode::automatic;
  std::shared_ptr<spdlog::sinks::sink> sink;
  if (toStdout) {
    sink = std::make_shared<spdlog::sinks::stdout_color_sink_mt>(mode);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>(mode);
  }
  sink->set_formatter(std::make_unique<LineFormatter>(format, command));
  return sink;
}

std::shared_ptr<spdlog::logger> cached(std::map<std::string, std::shared_ptr<spdlog::logger>>& map,
                                       const std::string& name, const std::shared_ptr<spdlog::sinks::sink>& sink,
                                       spdlog::level::level_enum level) {
  if (auto it = map.find(name); it != map.end()) return it->second;
  auto logger = std::make_shared<spdlog::logger>(name, sink);
  logger->set_level(level);
  logger->flush_on(spdlog::level::trace);
  map.emplace(name, logger);
  return logger;
}

}  // namespace

void setupLogging(const std::string& level, LogFormat format, const std::string& command) {
  auto logger = std::make_shared<spdlog::logger>("", makeSink(false, format, command));
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  std::lock_guard lock(loggersMutex());
  spdlog::set_default_logger(logger);
  Loggers& l = loggers();
  l = Loggers{logger->level(), makeSink(true, format, command), {}, {}};
}

std::shared_ptr<spdlog::logger> sourceLogger(const std::string& source) {
  std::lock_guard lock(loggersMutex());
  auto base = spdlog::default_logger();
  return cached(loggers().sources, source, base->sinks().front(), base->level());
}

std::shared_ptr<spdlog::logger> resultLogger(const std::string& source) {
  std::lock_guard lock(loggersMutex());
  Loggers& l = loggers();
  return cached(l.results, source, l.stdoutSink, l.level);
}

std::string logSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t n = c >= 0x80 ? utf8SequenceAt(text, i) : (c < 0x20 || c == 0x7f ? 0 : 1);
    if (n == 0) {
      out += fmt::format("\\x{:02x}", c);
    } else {
      out.append(text.substr(i, n));
      i += n - 1;
    }
  }
  return out;
}

std::string currentExceptionMessage() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

void runRestartedAfterBugs(StopSignal& stop, const std::string& where, const std::function<void()>& work,
                           const std::function<void()>& fallBack, std::chrono::milliseconds after) {
  for (;;) {
    try {
      work();
      return;
    } catch (...) {
      spdlog::error("{}: failed (a bug: please report it): {}; the sources poll on their own meanwhile (starting "
                    "again in {:g} s)",
                    where, currentExceptionMessage(), static_cast<double>(after.count()) / 1000);
      fallBack();
    }
    if (stop.waitFor(after)) return;
  }
}

}  // namespace outbox
