// Text that other users wrote, made safe to print to a terminal.
//
// Job names, descriptions, commands, owners, profiler paths, error texts and profiler output
// come from users (or from programs they run). Printed as they are, a control character in them
// acts on the reader's terminal: ESC starts sequences that clear the screen, move the cursor,
// retitle the window or write the clipboard (OSC 52), BEL rings, CR overwrites a line. Every
// text view passes such text through EscapeControl first; JSON output needs no more than its
// own escaping (nlohmann escapes C0 controls; see the comment on EscapeControl for the rest).
//
// The convention, one for every view:
//   ESC (0x1b)                         -> \e
//   other C0 controls (0x00-0x1f), DEL -> \xNN   (two lower-case hex digits: BEL is \x07)
//   C1 controls U+0080-U+009F (UTF-8)  -> \u0080 .. \u009f
//   a byte that is not valid UTF-8     -> \xNN   (0x9b alone is CSI on 8-bit terminals)
// Newline and tab are kept where the caller says so (multi-line text: a log, a detail block),
// else escaped too (a table cell, a one-line message). A backslash stays as it is: the escaped
// forms are for reading, not for decoding back. Plain functions; any thread.
#pragma once

#include <string>
#include <string_view>

namespace ckprof {

enum class LineBreaks {
  kEscape,  // \n and \t are escaped too: one-line text (a table cell, a name)
  kKeep,    // \n and \t are kept: multi-line text (a profiler's output, a message)
};

// `text` with every control character shown visibly (see above); valid UTF-8 printable text
// (including "✓", "ě") is unchanged.
std::string EscapeControl(std::string_view text, LineBreaks breaks = LineBreaks::kEscape);

// JSON text (nlohmann's dump: C0 controls already \u00XX) with the controls JSON leaves raw,
// DEL and C1 (U+0080-U+009F), as \u escapes too: the same JSON, nothing a terminal acts on.
// Every JSON the client prints passes through it. `json` must be valid JSON text (such bytes can
// only stand inside its strings).
std::string JsonForTerminal(std::string json);

// Whether EscapeControl would change `text`.
bool HasControl(std::string_view text, LineBreaks breaks = LineBreaks::kEscape);

}  // namespace ckprof
