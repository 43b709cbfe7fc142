// ClientMain: `ckprof [--socket PATH] COMMAND ...` — global options, then one command.
#pragma once

namespace ckprof {

int ClientMain(int argc, char** argv);

}  // namespace ckprof
