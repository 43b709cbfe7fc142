#include "tests/util/sql.h"

#include <sqlite3.h>

#include <stdexcept>

namespace ckprof::testing {

std::vector<std::vector<std::string>> SqlQuery(const std::string& db_path, const std::string& sql) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close_v2(db);
    throw std::runtime_error("cannot open " + db_path + ": " + msg);
  }
  sqlite3_busy_timeout(db, 5000);
  std::vector<std::vector<std::string>> rows;
  auto on_row = [](void* p, int n, char** values, char**) {
    auto* out = static_cast<std::vector<std::vector<std::string>>*>(p);
    std::vector<std::string> row;
    for (int i = 0; i < n; ++i) row.emplace_back(values[i] ? values[i] : "");
    out->push_back(std::move(row));
    return 0;
  };
  char* err = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), on_row, &rows, &err);
  std::string msg = err ? err : "";
  sqlite3_free(err);
  sqlite3_close_v2(db);
  if (rc != SQLITE_OK) throw std::runtime_error("query failed on " + db_path + ": " + msg);
  return rows;
}

}  // namespace ckprof::testing
