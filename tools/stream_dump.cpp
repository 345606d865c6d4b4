// outbox-stream-dump: prints a stream's messages — sequence, subject, headers, body — so that
// operators (and the README's worked example) can see exactly what consumers receive.

#include <cstdio>

#include <CLI/CLI.hpp>

#include "nats/jetstream.h"

int main(int argc, char** argv) {
  CLI::App app{"outbox-stream-dump: print the messages of a JetStream stream with their headers"};
  std::string url = "nats://127.0.0.1:4222", stream, subject = ">";
  uint64_t last = 10;
  app.add_option("--nats", url, "nats://HOST:PORT (default nats://127.0.0.1:4222)");
  app.add_option("--stream", stream, "stream name, e.g. CONTROL_ACCOUNT")->required();
  app.add_option("--subject", subject, "subject filter within the stream (default: all)");
  app.add_option("--last", last, "how many of the newest messages (default 10; 0: all)");
  CLI11_PARSE(app, argc, argv);

  auto nc = outbox::nats::Connection::connect(outbox::NatsConfig{.url = url}, "outbox-stream-dump");
  if (!nc.isOk()) {
    std::fprintf(stderr, "outbox-stream-dump: %s\n", nc.status().message().c_str());
    return 1;
  }
  auto js = outbox::nats::JetStream::create(**nc, std::chrono::milliseconds(5000), 16);
  if (!js.isOk()) {
    std::fprintf(stderr, "outbox-stream-dump: %s\n", js.status().message().c_str());
    return 1;
  }
  auto state = (*js)->streamState(stream);
  if (!state.isOk()) {
    std::fprintf(stderr, "outbox-stream-dump: %s\n", state.status().message().c_str());
    return 1;
  }
  std::printf("stream %s: %llu messages, sequences %llu..%llu\n", stream.c_str(),
              static_cast<unsigned long long>(state->messages), static_cast<unsigned long long>(state->firstSeq),
              static_cast<unsigned long long>(state->lastSeq));
  if (state->messages == 0) return 0;
  uint64_t from = state->firstSeq;
  if (last > 0 && state->lastSeq >= last && state->lastSeq - last + 1 > from) from = state->lastSeq - last + 1;
  auto messages = (*js)->readRange(stream, subject, from, state->lastSeq, std::chrono::milliseconds(5000));
  if (!messages.isOk()) {
    std::fprintf(stderr, "outbox-stream-dump: %s\n", messages.status().message().c_str());
    return 1;
  }
  for (const auto& m : *messages) {
    std::printf("\n#%llu %s\n", static_cast<unsigned long long>(m.seq), m.subject.c_str());
    for (const auto& [k, v] : m.headers) std::printf("  %s: %s\n", k.c_str(), v.c_str());
    std::printf("  %s\n", m.data.empty() ? "(empty body)" : m.data.c_str());
  }
  return 0;
}
