#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace outbox {

// One header of a message, from the outbox row's `headers` column.
using RowHeader = std::pair<std::string, std::string>;

// The headers a row's `headers` column asks for (README, "Subjects and headers"): a JSON object of
// string -> string, each pair one message header, in the object's order; JSON null or {} asks for
// none, and so does a pair whose value is "" (NATS has no empty header value). Returns "" and
// fills `out`, or why the row cannot carry them (it is then poison, README, "Operating it"): not a
// JSON object, a value that is not a string, a name that is no header token (RFC 9110: letters,
// digits and !#$%&'*+-.^_`|~), a reserved name (Nats-*, Outbox-*, Content-Type: the bridge sets
// those; Status, Description: NATS clients read them as a server status; in any case), a value
// holding a control character other than tab (a CR or LF would end the header), or one that
// begins or ends with a space or tab (NATS clients trim them), or a name given twice (in any
// case).
std::string parseRowHeaders(std::string_view json, std::vector<RowHeader>& out);

}  // namespace outbox
