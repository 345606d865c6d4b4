#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <spdlog/logger.h>

#include "common/stop_token.h"

namespace outbox {

// How log lines look on stderr:
//   kText: 2026-11-30T20:21:56.123Z INFO  [account] published 1000 rows ...
//   kJson: {"time":"2026-11-30T20:21:56.123456Z","level":"info","source":"account",
//           "message":"published 1000 rows ...","command":"run","pid":4242}
// one object a line; "source" only on lines about one source.
enum class LogFormat { kText, kJson };

// Sets up the process's logging on stderr: `level` is one of trace, debug, info, warn, error, off
// (validated by the config); `command` (the subcommand) goes into every JSON line. Call once,
// before the first log line; the default logger and every sourceLogger() follow it.
void setupLogging(const std::string& level, LogFormat format, const std::string& command);

// The logger for lines about one source: the default logger's sink, level and format, with the
// source shown as "[name]" in text and as the "source" field in JSON. Thread-safe; the same
// logger for the same name.
std::shared_ptr<spdlog::logger> sourceLogger(const std::string& source);

// The same on stdout, for a command's results (prune's summary per source, migrate's applied
// files, the epoch bump): a cron job or a script reads them apart from the diagnostics on stderr.
// `source` may be empty. Call setupLogging() first.
std::shared_ptr<spdlog::logger> resultLogger(const std::string& source);

// `text` for a field of a log line that a client or an operator wrote (a request path, a
// quarantine reason): control bytes, DEL and bytes that are not UTF-8 as \xNN, so the field can
// neither forge a second line nor make the log binary.
std::string logSafe(std::string_view text);

// Inside a catch block: what the exception being handled says (its what(), or that it is no
// std::exception), for the line that logs a bug caught on a thread of its own.
std::string currentExceptionMessage();

// The body of a helper thread whose work the sources can do without a while (the doorbell, the
// idle check): runs `work` until it returns. An exception from it is a bug (a column a result
// lacks: db::Rows::index) that on that thread would end the process and every source with it:
// it is logged as `where` failing, `fallBack` makes the sources poll on their own, and `work`
// starts again `after` that (a minute) unless `stop` was asked for meanwhile.
void runRestartedAfterBugs(StopSignal& stop, const std::string& where, const std::function<void()>& work,
                           const std::function<void()>& fallBack,
                           std::chrono::milliseconds after = std::chrono::seconds(60));

}  // namespace outbox
