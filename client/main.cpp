// ckprof: the client. Parses global options and dispatches to one command.
#include "client/main_dispatch.h"

int main(int argc, char** argv) { return ckprof::ClientMain(argc, argv); }
