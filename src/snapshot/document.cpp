#include "snapshot/document.h"

#include <simdjson.h>

#include <fmt/format.h>

#include "snapshot/checksum.h"

namespace outbox {

namespace {

using simdjson::ondemand::json_type;

std::string_view trimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\n' || s.back() == '\r' || s.back() == '\t')) {
    s.remove_suffix(1);
  }
  return s;
}

// A JSON value as MySQL's text form: numbers by their literal, strings unescaped, null as
// nullopt. Throws simdjson_error on malformed input.
std::optional<std::string> textOf(simdjson::ondemand::value value, bool& numeric) {
  numeric = false;
  switch (value.type()) {
    case json_type::null:
      if (!value.is_null()) throw simdjson::simdjson_error(simdjson::INCORRECT_TYPE);
      return std::nullopt;
    case json_type::number:
      numeric = true;
      return std::string(trimRight(value.raw_json_token()));
    case json_type::string:
      return std::string(std::string_view(value.get_string()));
    case json_type::boolean:
      return std::string(bool(value.get_bool()) ? "true" : "false");
    case json_type::object: {
      simdjson::ondemand::object object = value.get_object();
      return std::string(trimRight(std::string_view(object.raw_json())));
    }
    default: {
      simdjson::ondemand::array array = value.get_array();
      return std::string(trimRight(std::string_view(array.raw_json())));
    }
  }
}

uint64_t u64Of(simdjson::ondemand::value value) { return uint64_t(value.get_uint64()); }

}  // namespace

Result<std::vector<RecordField>> parseRecord(std::string_view json) {
  std::vector<RecordField> out;
  try {
    simdjson::ondemand::parser parser;
    simdjson::padded_string padded(json);
    simdjson::ondemand::document doc = parser.iterate(padded);
    for (auto field : doc.get_object()) {
      RecordField f;
      f.name = std::string(std::string_view(field.unescaped_key()));
      f.text = textOf(field.value(), f.numeric);
      out.push_back(std::move(f));
    }
  } catch (const simdjson::simdjson_error& e) {
    return Status::permanent(fmt::format("not a JSON object ({})", e.what()));
  }
  return out;
}

Result<ParsedSnapshot> parseSnapshot(std::string_view json, bool expectRecords) {
  // simdjson reports malformed input by exception here; it never leaves this function.
  ParsedSnapshot s;
  bool haveCount = false, haveChecksum = false, haveRecords = false, haveEpoch = false, haveWatermark = false;
  std::string checksumText;
  uint64_t computed = 0;
  try {
    simdjson::ondemand::parser parser;
    simdjson::padded_string padded(json);
    simdjson::ondemand::document doc = parser.iterate(padded);
    for (auto field : doc.get_object()) {
      std::string_view name = field.unescaped_key();
      simdjson::ondemand::value value = field.value();
      if (name == "schemaVersion") {
        if (u64Of(value) != 1) return Status::permanent("unsupported schemaVersion");
      } else if (name == "source") {
        s.source = std::string(std::string_view(value.get_string()));
      } else if (name == "sourceEpoch") {
        s.epoch = u64Of(value);
        haveEpoch = true;
      } else if (name == "watermark") {
        s.watermark = u64Of(value);
        haveWatermark = true;
      } else if (name == "stream") {
        for (auto sf : value.get_object()) {
          std::string_view sn = sf.unescaped_key();
          if (sn == "name") s.streamName = std::string(std::string_view(sf.value().get_string()));
          if (sn == "seq") s.streamSeq = u64Of(sf.value());
        }
      } else if (name == "key") {
        s.key = std::string(std::string_view(value.get_string()));
      } else if (name == "records") {
        haveRecords = true;
        for (auto recordValue : value.get_array()) {
          RecordValues values;
          size_t column = 0;
          for (auto rf : recordValue.get_object()) {
            std::string_view fieldName = rf.unescaped_key();
            bool numeric = false;
            auto text = textOf(rf.value(), numeric);
            if (s.records.empty()) {
              s.columns.emplace_back(fieldName);
              s.numeric.push_back(numeric);
            } else if (column >= s.columns.size() || s.columns[column] != fieldName) {
              return Status::permanent(
                  fmt::format("record {} has fields other than the first record's", s.records.size() + 1));
            }
            values.push_back(std::move(text));
            ++column;
          }
          if (column != s.columns.size()) {
            return Status::permanent(fmt::format("record {} has {} fields, the first has {}", s.records.size() + 1,
                                                 column, s.columns.size()));
          }
          computed += recordHash(values);
          s.records.push_back(std::move(values));
        }
      } else if (name == "recordCount") {
        s.recordCount = u64Of(value);
        haveCount = true;
      } else if (name == "checksum") {
        checksumText = std::string(std::string_view(value.get_string()));
        haveChecksum = true;
      }
    }
  } catch (const simdjson::simdjson_error& e) {
    return Status::permanent(fmt::format("malformed snapshot ({})", e.what()));
  }
  if (!haveEpoch || !haveWatermark || s.streamName.empty() || s.key.empty()) {
    return Status::permanent("snapshot lacks sourceEpoch, watermark, stream or key");
  }
  if (!haveCount || !haveChecksum) return Status::permanent("snapshot cut short: no recordCount or checksum");
  auto checksum = parseChecksum(checksumText);
  if (!checksum) return Status::permanent(fmt::format("bad checksum '{}'", checksumText));
  s.checksum = *checksum;
  if (expectRecords) {
    if (!haveRecords) return Status::permanent("snapshot has no records");
    if (s.records.size() != s.recordCount) {
      return Status::permanent(fmt::format("recordCount says {} but {} records came", s.recordCount, s.records.size()));
    }
    if (computed != s.checksum) {
      return Status::permanent(fmt::format("checksum says {} but the records sum to {}", checksumText,
                                           formatChecksum(computed)));
    }
  }
  return s;
}

}  // namespace outbox
