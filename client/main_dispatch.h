// ClientMain: `ckprof [--socket PATH] COMMAND ...` — global options (before or after the
// command), then one command.
#pragma once

namespace ckprof {

int ClientMain(int argc, char** argv);

}  // namespace ckprof
