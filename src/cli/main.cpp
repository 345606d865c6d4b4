// outbox-bridge: transactional-outbox tables to JetStream streams. See README.md.

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "cli/cli.h"
#include "common/log.h"
#include "outbox_version.h"

namespace {

using namespace outbox::cli;

// The commands the parse went into: the root, then each subcommand it found.
std::vector<CLI::App*> parsedChain(CLI::App& app) {
  std::vector<CLI::App*> chain{&app};
  while (!chain.back()->get_subcommands().empty()) chain.push_back(chain.back()->get_subcommands().front());
  return chain;
}

// "epoch bump" for the chain up to `depth`; "outbox-bridge" for the root.
std::string pathOf(const std::vector<CLI::App*>& chain, size_t depth) {
  std::string path;
  for (size_t i = 1; i <= depth && i < chain.size(); ++i) path += (path.empty() ? "" : " ") + chain[i]->get_name();
  return path.empty() ? "outbox-bridge" : path;
}

// A line as the terminal may show it: control characters as \xNN, cut at `max` bytes. What
// CLI11 says is built from our option names, but is escaped all the same.
std::string escapedLine(const std::string& text, size_t max = 600) {
  std::string out;
  for (size_t i = 0; i < text.size() && out.size() < max; ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    out += c < 32 || c == 127 ? fmt::format("\\x{:02x}", c) : std::string(1, static_cast<char>(c));
  }
  return out.size() < max ? out : out + "...";
}

// An unknown flag as it may be shown: its name only. A long flag is cut where a value could
// begin ('=' or any character a flag name does not have) and at 40 characters; a short one
// after its letter (-pSECRET is -p with the value SECRET).
std::string flagName(const std::string& arg) {
  if (arg.rfind("--", 0) != 0) return outbox::shownValue(arg.substr(0, 2));
  size_t end = 2;
  while (end < arg.size() && end < 40 && (std::isalnum(static_cast<unsigned char>(arg[end])) || arg[end] == '-' ||
                                          arg[end] == '_')) {
    ++end;
  }
  return outbox::shownValue(arg.substr(0, end)) + (end < arg.size() && arg[end] != '=' ? "..." : "");
}

bool isFlag(const std::string& arg) {
  return arg.size() > 1 && arg[0] == '-' && arg != "--" && !std::isdigit(static_cast<unsigned char>(arg[1])) &&
         arg[1] != '.';
}

size_t editDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// The known name closest to `given` (" (did you mean X?)"), or "" when none is close.
std::string closest(const std::string& given, const std::vector<std::string>& known) {
  std::string best;
  size_t bestDistance = 3;
  for (const auto& k : known) {
    // -c for --config: a short flag that only one long flag starts with.
    if (given.size() == 2 && given[0] == '-' && k.size() > 3 && k[2] == given[1]) {
      if (best.empty() || bestDistance > 0) best = k, bestDistance = 0;
      continue;
    }
    const size_t d = editDistance(given, k);
    if (d < bestDistance && d * 3 <= k.size()) best = k, bestDistance = d;
  }
  return best.empty() ? "" : fmt::format(" (did you mean {}?)", best);
}

std::vector<std::string> longFlags(const CLI::App* app) {
  std::vector<std::string> names{"--help"};
  if (app->get_parent() == nullptr) names.push_back("--version");
  for (const CLI::Option* o : app->get_options()) {
    for (const auto& l : o->get_lnames()) names.push_back("--" + l);
  }
  return names;
}

std::vector<std::string> commandNames(const CLI::App* app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
    names.push_back(sub->get_name());
  }
  return names;
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out;
}

// What each command in the chain did not understand: unknown flags by name, an unknown command
// by name, other arguments by number only. "" when every argument was understood.
std::string unknownArguments(const std::vector<CLI::App*>& chain) {
  std::vector<std::string> parts;
  for (size_t depth = 0; depth < chain.size(); ++depth) {
    const std::vector<std::string> items = chain[depth]->remaining();
    if (items.empty()) continue;
    const std::string path = pathOf(chain, depth);
    const bool wantsCommand = !commandNames(chain[depth]).empty() && depth + 1 == chain.size();
    size_t extras = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string& item = items[i];
      if (isFlag(item)) {
        std::string hint = closest(flagName(item), longFlags(chain[depth]));
        // An option of the command, given before it: `outbox-bridge --config F run`.
        if (hint.empty() && depth + 1 < chain.size() && chain[depth + 1]->get_option_no_throw(flagName(item))) {
          hint = fmt::format(" (options go after the command: {} {})", pathOf(chain, depth + 1), flagName(item));
        }
        parts.push_back(
            fmt::format("unknown option '{}' for {}{}", flagName(item), depth == 0 ? "outbox-bridge" : path, hint));
      } else if (i == 0 && wantsCommand) {
        // A command's name is a word; anything else is not echoed.
        const bool word = item.size() <= 40 && std::all_of(item.begin(), item.end(), [](unsigned char c) {
                            return std::isalnum(c) || c == '-' || c == '_';
                          });
        const std::string name = depth == 0 ? item : path + " " + item;
        parts.push_back(fmt::format("unknown command {}{} (commands: {})", word ? "'" + name + "'" : "(not shown)",
                                    word ? closest(item, commandNames(chain[depth])) : "",
                                    joined(commandNames(chain[depth]))));
      } else {
        ++extras;
      }
    }
    if (extras > 0) {
      parts.push_back(fmt::format("{} argument{} {} does not take", extras, extras == 1 ? "" : "s", path));
    }
    if (wantsCommand && (items.empty() || isFlag(items.front()))) {
      parts.push_back(fmt::format("{} needs a command ({})", path, joined(commandNames(chain[depth]))));
    }
  }
  if (parts.empty()) return "";
  std::string line;
  for (const auto& p : parts) line += (line.empty() ? "" : "; ") + p;
  return line + " (values are not shown)";
}

// The option of the chain's last command that `text` names (CLI11 puts the name in its message).
const CLI::Option* namedOption(const std::vector<CLI::App*>& chain, const std::string& text) {
  const CLI::Option* found = nullptr;
  for (const CLI::Option* o : chain.back()->get_options()) {
    const std::string name = o->get_name();
    if (!name.empty() && text.find(name) != std::string::npos &&
        (found == nullptr || name.size() > found->get_name().size())) {
      found = o;
    }
  }
  return found;
}

// The one line every command-line error is told in (exit 2). It never echoes a value: unknown
// flags by name, arguments by number, a value CLI11 could not convert not at all; what it does
// show (option names, the reasons of our own validators, which echo no value) is escaped and cut.
std::string usageError(CLI::App& app, const CLI::ParseError& e) {
  const std::vector<CLI::App*> chain = parsedChain(app);
  const std::string path = pathOf(chain, chain.size() - 1);
  const std::string help =
      fmt::format(" (see outbox-bridge{} --help)", chain.size() > 1 ? " " + path : std::string());
  if (std::string unknown = unknownArguments(chain); !unknown.empty()) return escapedLine(unknown) + help;
  const std::string what = e.what();
  const CLI::Option* option = namedOption(chain, what);
  const std::string name = option != nullptr ? option->get_name() : "an option";
  auto line = [&](const std::string& text) { return escapedLine(path + ": " + text) + help; };
  if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr) {
    for (CLI::App* a : chain) {
      if (a->get_require_subcommand_min() > 0 && a->get_subcommands().empty()) {
        return fmt::format("{} needs a command ({}){}", path, joined(commandNames(a)), help);
      }
    }
    std::vector<std::string> missing;
    for (const CLI::Option* o : chain.back()->get_options()) {
      if (o->get_required() && o->count() == 0) {
        missing.push_back(o->get_envname().empty() ? o->get_name()
                                                   : fmt::format("{} (or ${})", o->get_name(), o->get_envname()));
      }
    }
    if (!missing.empty()) return line(joined(missing) + " is required");
  } else if (dynamic_cast<const CLI::ArgumentMismatch*>(&e) != nullptr) {
    if (what.find("At Most") != std::string::npos) return line(name + " is given more than once");
    if (what.find("flag override") != std::string::npos) return line(name + " takes no value");
    return line(name + " needs a value");
  } else if (dynamic_cast<const CLI::ConversionError*>(&e) != nullptr) {
    if (option != nullptr && option->get_expected_max() == 0) {
      return line(name + " takes no value (the value is not shown)");
    }
    return line(name + ": not a value it takes (the value is not shown)");
  } else if (dynamic_cast<const CLI::ValidationError*>(&e) != nullptr ||
             dynamic_cast<const CLI::RequiresError*>(&e) != nullptr ||
             dynamic_cast<const CLI::ExcludesError*>(&e) != nullptr) {
    // CLI11's "NAME: reason": our validators' reasons (cli.h: flag rules) name the rule, never the value.
    return line(what);
  }
  return line(fmt::format("the command line was not understood ({}; values are not shown)", e.get_name()));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"outbox-bridge: publishes transactional-outbox tables in MySQL/MariaDB to NATS JetStream streams,\n"
               "with dense versions, exactly once."};
  app.set_version_flag("--version", std::string("outbox-bridge ") + OUTBOX_BRIDGE_VERSION);
  app.require_subcommand(1);
  std::map<CLI::App*, Command> commands;
  for (const Subcommand& sub : subcommands()) {
    CLI::App* cmd = app.add_subcommand(sub.name, sub.summary);
    commands[cmd] = sub.addOptions(cmd);
  }
  applyFlagRules(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "outbox-bridge: %s\n", usageError(app, e).c_str());
    return kExitUsage;
  }
  try {
    for (auto& [sub, run] : commands) {
      if (!sub->parsed()) continue;
      // Until a command has loaded its config (which may ask for JSON or another level).
      outbox::setupLogging("info", outbox::LogFormat::kText, sub->get_name());
      return run();
    }
  } catch (const Exit& e) {
    if (e.message.empty()) return e.code;
    // Usage and config errors come before the config's [log] settings: plain text, to the point.
    if (e.code == kExitUsage) {
      std::fprintf(stderr, "outbox-bridge: %s\n", e.message.c_str());
    } else {
      spdlog::error("{}", e.message);
    }
    return e.code;
  } catch (const outbox::ConfigError& e) {
    std::fprintf(stderr, "outbox-bridge: config error: %s: %s\n", e.key().c_str(), e.reason().c_str());
    return kExitUsage;
  } catch (const std::exception& e) {
    // No exception leaves a command unexplained (an abort would print only its type).
    std::fprintf(stderr, "outbox-bridge: %s\n", e.what());
    return kExitFailure;
  }
  return kExitUsage;
}
