#include <iostream>

int main() {
  std::cerr << "ckprofiler-emu: not built yet\n";
  return 1;
}
