#include <iostream>

#include "client/commands.h"

namespace ckprof {

int RunConvertCommand(const Args&) {
  std::cerr << "ckprof convert: not built yet\n";
  return 1;
}

}  // namespace ckprof
