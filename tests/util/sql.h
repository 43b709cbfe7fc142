// SQL on a daemon's state database, for the checks a test makes on what survived (PRAGMA
// integrity_check, the rows of a table). Test threads only.
#pragma once

#include <string>
#include <vector>

namespace ckprof::testing {

// Runs an SQLite query on a database file; the rows, each column as text. Throws on error.
std::vector<std::vector<std::string>> SqlQuery(const std::string& db_path, const std::string& sql);

}  // namespace ckprof::testing
